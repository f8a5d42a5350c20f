"""The app's screens, one module each: main, launch wizard, sessions, help, server log, modals.

The main screen (`main.py`, holding its server side, `server_panel.py`), the launch wizard
(`launch_wizard.py`, holding its launch step, `launch_step.py`, with `model_options.py`), the
sessions screen, help,
the server log, and the approval and failover modals over their shared base, `guarded_modal.py`.
They compose `widgets/`, use the `tui` modules above them and call the core through `chat`.
"""
