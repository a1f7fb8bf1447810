# Serving study (issue 13).
