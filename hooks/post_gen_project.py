"""Remove what the chosen answers do not need.

The template carries one module per sandbox backend; the generated service
keeps only those it uses (the primary backend and any additional ones), so it
reads as if written for them alone. Tests of features that were not chosen go
too. The list is local_extensions.unused_files, which copier reads too (it
never writes these files). Runs offline: it only deletes files (and a
directory whose files all go). Then, when only this machine can install the
project's runtime (a template rendered from a local path or a file:// URL),
it says so in one line (local_extensions.runtime_notice).
"""

import shutil
from pathlib import Path

UNUSED = {{ cookiecutter | unused_files | tojson }}
NOTICE = {{ runtime_notice(cookiecutter) | tojson }}

if __name__ == "__main__":
    for path in map(Path, UNUSED):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    if NOTICE:
        print(NOTICE)
