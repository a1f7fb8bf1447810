# Notebooks (issue 6): one per study, executed from cached results and rendered to HTML.
