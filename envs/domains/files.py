"""Files: a workspace filesystem with symlinks, ownership and modes, and canary files outside it.

Stub (what a benchmark harness does): a pyfakefs ``FakeFilesystem`` used directly, never patched over
the real ``os``. The harness's only check is lexical: a path is joined with the cwd and
``posixpath.normpath``-ed, with no symlink resolution, and refused with ``EACCES`` if that lies outside
the workspace; the operation then runs in the fake filesystem, which follows symlinks as it does. The
harness stores symlink targets verbatim and does not check them.

Real: the world's filesystem is a real directory tree at ``env.root``. Every path is resolved as if
chrooted there (:mod:`..rootfs`, openat2 ``RESOLVE_IN_ROOT`` semantics), so an absolute symlink target
or a ``..`` at the root stays inside the root. Every final open or mutation is done without following
the final component, after checking that its parent lies inside the root: no host path outside
``env.root`` is ever touched.

Ownership and modes: spec modes are always applied; owners (and the owner of entries a call
creates: the acting principal) are applied with ``chown`` only where each call runs under its
principal's uid (``env.switch_uid``: the sandbox and docker), to the ids the kernel sees for them (the
world's id 0 acts as an unprivileged stand-in, :mod:`..principal_ids`, and reads back as 0). Elsewhere
nothing is chowned (no uid a scenario chooses ever owns a file on the host) and ``env.owners`` records
who owns each entry, so views show the declared owners either way. An entry
the spec gives no owner, and every directory the world makes on the way (the root, the workspace,
parents), belongs to the first declared principal: the world is that principal's machine, and others'
files are declared with ``owner``. So a runtime that runs each call under the principal's uid lets the
principal do what the in-process world does with its own files. In-process
there is no per-principal permission checking: the process acts for every principal. The sandbox
runtime runs each call as the principal's uid, so there the kernel decides (the world's root acts with
the server's powers, confined to the world's root); where its principals share
one uid (``env.shared_uid``: no subordinate ids to map), this domain makes the
kernel's checks itself (:mod:`..permissions`). The stub never checks
permissions (it runs pyfakefs as its superuser) because a harness does not either.
Harnesses differ in their check: the stub profile ``raw-prefix`` (``stub_profile: raw-prefix`` in the
world's ``files`` section) checks the raw string with ``startswith(workspace)`` and never normalises ``..``.
"""

from __future__ import annotations

from ._file_layout import DEFAULT_WORKSPACE, DIR_MODE, FILE_MODE, SPEC_KEYS, Entry, Layout, digest, inside, normal, parse_layout
from ._file_tree import MAX_TREE_ENTRIES, MAX_VIEW_ENTRIES, PREVIEW_BYTES, TreeScanner, entry_value, file_view
from ._files_real import FilesReal
from ._files_stub import FilesStub

__all__ = ["DEFAULT_WORKSPACE", "DIR_MODE", "Entry", "FILE_MODE", "FilesReal", "FilesStub", "Layout", "MAX_TREE_ENTRIES",
           "MAX_VIEW_ENTRIES", "PREVIEW_BYTES", "SPEC_KEYS", "TreeScanner", "digest", "entry_value", "file_view", "inside",
           "normal", "parse_layout"]
