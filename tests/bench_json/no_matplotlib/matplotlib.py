# Stands in for a missing matplotlib: the plot scripts' test puts this folder first on PYTHONPATH.
raise ModuleNotFoundError("No module named 'matplotlib'")
