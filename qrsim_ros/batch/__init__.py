"""Monte Carlo batches of in-process episodes (``qrsim batch``): the per-episode job and its record
(``jobs``), the engines that run the jobs (``engine_local``: in process or a multiprocessing pool;
``engine_dask``: Dask distributed, a LocalCluster or an existing scheduler), the statistics (``stats``)
and the report (``report``: results.csv, summary.json, report.md; ``figures``: the PNGs).

Every job is computed from (scenario, seed, policy) only and the results are collected by episode index,
so what a batch reports does not depend on the engine, the number of workers or the completion order.
"""
