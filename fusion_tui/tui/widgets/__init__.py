"""The widgets the screens are made of: chat view, prompt box, slot map, status line, ...

The chat view and its messages (finished Markdown frozen into pieces, `markdown_cut.py`; pieces far
from the view parked, `parking.py`; the collector settled, `heap.py`), the prompt input, the
welcome block, the slot map (grouped by endpoint in `endpoint_slot_map.py`), the status line, the
prompt progress, tool-call blocks, the live agent step and the model picker's file tree. They may
import Textual, Rich, `tui.key_clock` and the core's read-only types (`server`, `slots`,
`endpoints`, `chat` events, `status`, `clock`); never a screen.
"""
