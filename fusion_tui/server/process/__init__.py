"""The managed llama-server as a process: find the binary, launch, probe, adopt, stop, diagnose.

`binary.py` (which llama-server), `launch.py` (`LaunchSpec`: the argv), `daemon.py`
(`ManagedDaemon`: pid file, launch record, start lock, adopt and stop) over `child.py` (one
child process and its log), `pids.py` (is a pid alive, and ours), `records.py`,
`start_lock.py`, `probe.py` (the start-up probe and measured speed), `crash.py` (how a start
died, in words), `cpu_quirks.py` (repacking off remembered for a binary and CPU),
`server_log.py` (the log, rotated and bounded), `log_tail.py` (its new lines, for the log screen),
`log_notes.py` (the lines fusion-tui adds: the launch plan, the KV check), `speculative.py` (the
speculative-decoding flags, and the `auto` verdicts kept per model and machine) and
`spec_trial.py` (the measurement behind `auto`). It may import
`server.http` to talk to what it started, `fit` (the allocation lines of the log, the RPC
devices), `paths` and `atomic`.
"""
