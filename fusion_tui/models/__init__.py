"""The models fusion-tui knows by short name (`catalog`), how a model shipped inside Python
packages is found, assembled and verified (`packaged`), the demo model the tests and benches run
on (`demo`), and the models the launch wizard lists with each one's profile (`registry`). See
docs/models.md."""
