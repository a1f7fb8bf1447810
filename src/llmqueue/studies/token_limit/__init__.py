"""The token-limit study (paper Sec. III and V-B; Fig. 4a-4d; claims 3-5).

A one-at-a-time server (M/G/1) whose replies are cut at a max-token limit l, with patient and
impatient users:

- :mod:`~llmqueue.studies.token_limit.spec`: the config read into its grids (the trade-off's
  gamma grid);
- :mod:`~llmqueue.studies.token_limit.tables`: one row per limit l of the grid with the closed
  form (Eq. 1-5; Eq. 6-9 for impatient users), the exact solution (M/G/1+D) and the simulation
  (:mod:`llmqueue.sim.mg1`) side by side; the utility trade-off (Eq. 10-14) and its optimum
  against gamma;
- :mod:`~llmqueue.studies.token_limit.claims`: claims 3-5 through one
  :class:`llmqueue.claims.ClaimBook`.

Units: tokens, seconds, requests per second.
"""

# this study's record in the catalogue (llmqueue.catalog)
STUDY = {
    "follows": "profiling",
    "claims": {
        3: "patient users: W_q at the limit 1600 and the optimal limit",
        4: "impatient users: the lost fraction at 1300 and the optimal limit",
        5: "shares of requests below 1600 and 1300 tokens",
    },
}
