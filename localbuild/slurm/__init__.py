"""`--scheduler slurm`: the job array of builds and the final job that indexes and summarises
(options, the two batch scripts, submission and waiting, the tasks' results, the final job)."""
