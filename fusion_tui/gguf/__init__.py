"""Reading a GGUF file's header, never its tensors, into the facts the rest of the app needs.

`reader.py` reads the header's key/value section within a byte budget (typed errors for a file
that is not a GGUF), `facts.py` turns it into `ModelFacts`, and `arch.py` holds the
per-architecture rules for sliding-window and recurrent layers. The bottom of the core: it imports
the standard library only, nothing else of fusion_tui.
"""
