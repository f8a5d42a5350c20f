"""Sizing a launch from a model's header: KV bytes, memory, the fitted context, the launch plan.

KV bytes layer by layer as llama.cpp allocates them (sliding-window and recurrent layers
included), the memory budget and the context that fits it, the `--swa-full` verdict and
prefix-reuse class, the launch plan, the split over RPC devices, the allocation read back from the
server log, and the `inspect` report. Pure computation except `devices.py`, which asks the binary
for its devices. It may import `gguf`, `config`, a few facts of `server` and `status`; never
`sessions`, `slots`, `chat`, `agent`, `tui` or `cli`.
"""
