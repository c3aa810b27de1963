"""Authenticated encryption of patch files: AES-256-GCM from the `cryptography` package.

An encrypted patch is MAGIC + 12-byte random nonce + ciphertext-with-tag. The device name and
base abbreviation are authenticated too (associated data), so a sealed patch moved to another
device's or base's folder fails to open just like a modified one.
"""

import base64
import binascii
import os
from pathlib import Path

from common import PatchError, abbrev

KEY_FILE = "dicp_patch.key"
MAGIC = b"DICP-PATCH-AESGCM-1\n"
NONCE_LEN = 12


def checked_key_dir(repo, key_path):
    """Resolved key directory; one inside the repository is refused so it is never committed."""
    key_dir = Path(key_path).expanduser().resolve()
    for inside in {repo.top.resolve(), repo.objects_dir().parent.resolve()}:
        if key_dir == inside or inside in key_dir.parents:
            raise PatchError(
                f"--key-path {key_path} is inside the repository ({inside}); keep "
                "the key outside it, e.g. --key-path ~/.dicp-patch-keys"
            )
    return key_dir


def load_key(key_dir):
    path = key_dir / KEY_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise PatchError(
            f"no key at {path}; ask the vendor of the patch for their {KEY_FILE} "
            f"and put it in {key_dir}"
        ) from None
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except binascii.Error:
        key = b""
    if len(key) != 32:
        raise PatchError(f"{path} is not a dicp patch key; restore the file the vendor gave you")
    return key


def load_or_create_key(key_dir):
    """(key, created): the existing key, or a new one written with owner-only permissions."""
    path = key_dir / KEY_FILE
    if path.exists():
        return load_key(key_dir), False
    if not key_dir.exists():
        key_dir.mkdir(mode=0o700, parents=True)
        os.chmod(key_dir, 0o700)  # mkdir's mode is narrowed by umask, never widened; be exact
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(fd, 0o600)
        out.write(base64.b64encode(os.urandom(32)).decode() + "\n")
    return load_key(key_dir), True


def seal(plain, key, device, base):
    nonce = os.urandom(NONCE_LEN)
    return MAGIC + nonce + _aesgcm(key).encrypt(nonce, plain, _context(device, base))


def unseal(sealed, key, device, base, where):
    """Decrypt in memory; `where` names the file in error messages."""
    if not sealed.startswith(MAGIC) or len(sealed) < len(MAGIC) + NONCE_LEN:
        raise PatchError(f"{where} is not a dicp encrypted patch; check out the file again")
    aesgcm = _aesgcm(key)
    from cryptography.exceptions import InvalidTag

    nonce = sealed[len(MAGIC) : len(MAGIC) + NONCE_LEN]
    try:
        return aesgcm.decrypt(nonce, sealed[len(MAGIC) + NONCE_LEN :], _context(device, base))
    except InvalidTag:
        raise PatchError(
            f"cannot decrypt {where}: wrong key, or the file was modified or moved; "
            "use the vendor's key and an untouched copy of the patch"
        ) from None


def _context(device, base):
    return f"dicp-patch:{device}:{abbrev(base)}".encode()


def _aesgcm(key):
    # Imported on demand so plain patches work without the package installed.
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise PatchError(
            "encrypted patches need the `cryptography` package; run `pip install cryptography`"
        ) from None
    return AESGCM(key)
