"""Provides the chat backend: what a UI (or the headless CLI) talks to for one session."""
