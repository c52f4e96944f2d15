"""Imported by the code generator: leaves a .pyc of the build Python in the source tree."""
VERSION = "2.13.0"


def version_header() -> str:
    return f'#pragma once\n#define TORCH_VERSION_STRING "{VERSION}"\n'
