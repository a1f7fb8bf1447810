"""The batching study (paper Sec. IV, V-C; Fig. 3a, 3b, 5, 6a, 6b; claims 6-9).

- :mod:`~llmqueue.studies.batching.spec`: the config read into typed settings: the exact chains'
  sizes (:class:`~llmqueue.studies.batching.spec.ChainSettings`) and the curves a lambda sweep draws
  (:class:`~llmqueue.studies.batching.spec.SweepSpec`; Fig. 5: dynamic and elastic with the bound;
  Fig. 6a: fixed K, random and fixed T; Fig. 6b: dynamic with each b_max, and elastic);
- :mod:`~llmqueue.studies.batching.tables`: every number for one (policy, lambda): Eq. (25) for
  fixed K (fixed-T approximation), Inoue's bound (16) for dynamic / elastic batching, the exact
  embedded Markov chain (:mod:`llmqueue.analytic.batch_chain`) and the simulation; the sweeps
  themselves; Fig. 3's E[L_b], E[T_b] (Eq. 18, 19, 23, 26) and mu_b (Eq. 24);
- :mod:`~llmqueue.studies.batching.claims`: claims 6-9 (docs/figures.md) from those tables,
  through one :class:`llmqueue.claims.ClaimBook`.

Units: seconds, requests/s, tokens. Each sweep point draws its own random stream,
``SeedSequence(seed, spawn_key=(stream, curve, rate index))`` (:mod:`llmqueue.seeds`).
"""

# this study's record in the catalogue (llmqueue.catalog)
STUDY = {
    "follows": "token_limit",
    "claims": {
        6: "mu_b rises with b and peaks for LogNormal lengths (Fig. 3b)",
        7: "bound (16) tracks dynamic batching; elastic beats dynamic (Fig. 5)",
        8: "the optimal fixed batch K* = 8 and Eq. (16)'s 125 s (Fig. 6a); can the A100 run it",
        9: "a finite b_max against b_max = inf; elastic against dynamic (Fig. 6b)",
    },
}
