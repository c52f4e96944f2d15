"""Secrets in the environment that must not reach a build or the engine client unasked."""
from __future__ import annotations

UPLOAD_TOKENS = ("BINSTAR_TOKEN", "ANACONDA_API_TOKEN", "STAGING_BINSTAR_TOKEN")
# The ones localbuild/in_container/build_steps.sh uploads with; --upload needs one of them.
UPLOAD_CREDENTIALS = ("BINSTAR_TOKEN", "ANACONDA_API_TOKEN")
# The compile cache's password: passed (by name) only to builds that use the cache.
CACHE_CREDENTIALS = ("FEEDSTOCK_COMPILE_CACHE_PASSWORD",)
# Never passed on unless uploading is asked for (and then only the upload tokens).
SECRET_VARIABLES = frozenset(UPLOAD_TOKENS + (
    "FEEDSTOCK_TOKEN", "GITHUB_TOKEN", "GH_TOKEN", "ANACONDA_TOKEN", "PREFIX_API_KEY",
    "CONDA_FORGE_WEBSERVICE_TOKEN", "STAGED_RECIPES_TOKEN") + CACHE_CREDENTIALS)


def without_secrets(environ: dict[str, str], keep: set[str] | frozenset[str] = frozenset()
                    ) -> dict[str, str]:
    return {k: v for k, v in environ.items() if k not in SECRET_VARIABLES or k in keep}
