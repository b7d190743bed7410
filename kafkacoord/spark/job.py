"""The view job as a program: ``python -m kafkacoord.spark.job [run options]``.

The same file works with spark-submit, which then decides the master::

    JOB=$(python -c 'import kafkacoord.spark.job as j; print(j.__file__)')
    spark-submit --master spark://host:7077 "$JOB" --bootstrap kafka:9092 --warehouse /shared/wh
"""

from __future__ import annotations

import sys

from kafkacoord.spark.cli import views_app


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    views_app(["run", *args], prog_name="kafkacoord-views")


if __name__ == "__main__":
    main()
