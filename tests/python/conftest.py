"""pytest set-up for the attnrank Python tests: print the seed every random input uses."""
import os


def pytest_report_header(config):
    seed = os.environ.get("ATTNRANK_PY_SEED", "20261202")
    return f"attnrank seed: ATTNRANK_PY_SEED={seed} (set it to replay or vary)"
