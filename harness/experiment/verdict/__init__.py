"""`harness verdict STUDY`: every preregistered hypothesis of a study (its file's `hypotheses:`) judged from
the cells' own files, paired by seed, the family corrected (Holm), one word each; and `--plan`: the seeds a
confirmatory run needs, from a pilot (docs/studies.md "Hypotheses and the verdict").

    paired.py   the paired t-test, TOST, Holm, and the rule that rules a claimed effect out
    values.py   a hypothesis's per-seed values and paired differences, read from the run folders
    judge.py    the rows and their words: CONFIRMED | EQUIVALENT | NOT CONFIRMED | INCONCLUSIVE
    prereg.py   confirmatory or exploratory: the study file's blob, the commit its hypotheses entered at,
                each cell's start
    plan.py     the power of the test over n seeds, the n needed
    report.py   markdown and JSON
    run.py      the command: read the folder, write verdict.md and verdict.json
"""
