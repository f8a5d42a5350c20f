"""The models fusion-tui knows by short name (`catalog`) and how a model shipped inside Python
packages is found, assembled and verified (`packaged`). See docs/models.md."""
