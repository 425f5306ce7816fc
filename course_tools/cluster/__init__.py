"""Grading a class larger than one machine: Slurm job arrays, one merge step (README: "A class larger than one machine").

manifest   the shards (chapter × students) of a class, their fingerprints, the class folder's layout
worker     one array task: grade one shard with ``classroom.autograde`` into node-local files, then publish them
gradebook  template gradebooks for the shards and the merge, through nbgrader's Gradebook API
merge      the merge job: the only writer of the class's gradebook (SQLite or PostgreSQL)
slurm      sbatch of the arrays (split at MaxArraySize) and the afterok merge; state from sacct/scontrol; rerun
localslurm a one-node Slurm on this machine (trying it out, tests)
bench      the Slurm path against ``llm-course autograde --jobs N`` on the same submissions
commands   ``llm-course cluster submit|work|merge|status|rerun|local-slurm``
safetext   student-derived text escaped before it reaches a terminal or a log
"""
