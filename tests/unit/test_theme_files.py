"""Theme files: the shipped ones parse, and every kind of bad file becomes a named failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui.config.theme_files import (
    APP_VARIABLES,
    ThemeFileError,
    builtin_themes_dir,
    load_theme_dir,
    load_theme_specs,
    parse_theme,
)

GOOD = """\
name: my-theme
dark: false
primary: "#336699"
background: "#FAFAFA"
text_alpha: 0.9
variables:
  slot-idle: "#999999"
  footer-key-foreground: "#336699"
"""


def test_a_good_theme_parses_into_its_fields() -> None:
    spec = parse_theme(GOOD, Path("my.yaml"))
    assert spec.name == "my-theme"
    assert spec.primary == "#336699"
    assert spec.background == "#FAFAFA"
    assert spec.dark is False
    assert spec.text_alpha == 0.9
    assert spec.luminosity_spread == 0.15
    assert spec.variables == {"slot-idle": "#999999", "footer-key-foreground": "#336699"}
    assert spec.colours() == {"primary": "#336699", "background": "#FAFAFA"}
    assert spec.source == Path("my.yaml")


def test_the_shipped_themes_are_four_or_more_with_a_dark_default_and_a_light_one() -> None:
    folder = builtin_themes_dir()
    assert folder.name == "themes"
    specs, failures = load_theme_dir(folder)
    assert failures == []
    by_name = {s.name: s for s in specs}
    assert len(by_name) >= 4
    assert by_name["fusion-dark"].dark is True
    assert by_name["fusion-light"].dark is False
    for spec in specs:
        assert set(APP_VARIABLES) <= set(spec.variables), spec.name
        assert spec.source is not None and spec.source.stem == spec.name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: x\nprimary: a: b\n", "line 2, column 11: invalid YAML (mapping values"),
        ("- just\n- a list\n", "top level must be a mapping"),
        ("name: x\nprimary: '#123456'\ncolour: red\n", "unknown field 'colour'"),
        ("primary: '#123456'\n", "'name' should be lower-case"),
        ("name: Big Name\nprimary: '#123456'\n", "'name' should be lower-case"),
        ("name: x\n", "'primary' is required"),
        ("name: x\nprimary: 12\n", "'primary' should be a colour"),
        ("name: x\nprimary: '#123456'\ndark: 'yes'\n", "'dark' should be true or false"),
        ("name: x\nprimary: '#123456'\ntext_alpha: 2\n", "'text_alpha' should be a number"),
        ("name: x\nprimary: '#123456'\nvariables: [a]\n", "'variables' should be a mapping"),
        ("name: x\nprimary: '#1'\nvariables:\n  Bad_Name: red\n", "variable name 'Bad_Name'"),
        ("name: x\nprimary: '#1'\nvariables:\n  slot-idle: [1]\n", "variable 'slot-idle'"),
    ],
)
def test_bad_theme_text_raises_a_one_line_reason(text: str, expected: str) -> None:
    with pytest.raises(ThemeFileError) as info:
        parse_theme(text)
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_a_folder_with_good_and_bad_files_returns_both_lists(tmp_path: Path) -> None:
    (tmp_path / "a-good.yaml").write_text(GOOD)
    (tmp_path / "b-broken.yaml").write_text("name: broken\nprimary: a: b\n")
    (tmp_path / "c-wrong.yml").write_text("name: wrong\nprimary: '#123456'\nshade: 3\n")
    (tmp_path / "d-binary.yaml").write_bytes(b"\xff\xfe\x00name")
    (tmp_path / "notes.txt").write_text("not a theme")
    specs, failures = load_theme_dir(tmp_path)
    assert [s.name for s in specs] == ["my-theme"]
    assert [f.path.name for f in failures] == ["b-broken.yaml", "c-wrong.yml", "d-binary.yaml"]
    messages = [f.message() for f in failures]
    assert messages[0].startswith("b-broken.yaml: line 2, column 11: invalid YAML")
    assert "unknown field 'shade'" in messages[1]
    assert messages[2] == "d-binary.yaml: not UTF-8 text"


def test_a_later_file_replaces_an_earlier_theme_of_the_same_name(tmp_path: Path) -> None:
    first, second = tmp_path / "1.yaml", tmp_path / "2.yaml"
    first.write_text(GOOD)
    second.write_text(GOOD.replace("#336699", "#AA0000"))
    specs, failures = load_theme_specs([first, second])
    assert failures == []
    assert [(s.name, s.primary) for s in specs] == [("my-theme", "#AA0000")]


def test_a_missing_folder_is_no_themes_and_no_failures(tmp_path: Path) -> None:
    assert load_theme_dir(tmp_path / "nope") == ([], [])


def test_an_oversized_file_is_refused_without_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("name: big\nprimary: '#123456'\n# " + "x" * 70_000 + "\n")
    specs, failures = load_theme_dir(tmp_path)
    assert specs == []
    assert "too large" in failures[0].problem
