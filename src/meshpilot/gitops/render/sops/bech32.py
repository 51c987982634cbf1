"""Bech32 (BIP 173) decoding and encoding, as age uses it for keys and recipients.

age keys are longer than BIP 173's 90 characters, so no length limit is applied.
"""

from __future__ import annotations

__all__ = ["Bech32Error", "decode", "encode"]

_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_GENERATOR = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)


class Bech32Error(ValueError):
    """Not a valid Bech32 string (bad characters, mixed case or checksum)."""


def _polymod(values: list[int]) -> int:
    check = 1
    for value in values:
        top = check >> 25
        check = (check & 0x1FFFFFF) << 5 ^ value
        for i, gen in enumerate(_GENERATOR):
            if (top >> i) & 1:
                check ^= gen
    return check


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def _convert_bits(data: list[int], from_bits: int, to_bits: int, pad: bool) -> list[int]:
    acc = bits = 0
    out: list[int] = []
    maxv = (1 << to_bits) - 1
    for value in data:
        acc = (acc << from_bits) | value
        bits += from_bits
        while bits >= to_bits:
            bits -= to_bits
            out.append((acc >> bits) & maxv)
    if pad and bits:
        out.append((acc << (to_bits - bits)) & maxv)
    elif not pad and (bits >= from_bits or (acc << (to_bits - bits)) & maxv):
        raise Bech32Error("invalid padding")
    return out


def decode(text: str) -> tuple[str, bytes]:
    """Return (human-readable part in lower case, data bytes)."""
    if text.lower() != text and text.upper() != text:
        raise Bech32Error("mixed case")
    lowered = text.lower()
    sep = lowered.rfind("1")
    if sep < 1 or sep + 7 > len(lowered):
        raise Bech32Error("missing separator or checksum")
    hrp, rest = lowered[:sep], lowered[sep + 1 :]
    try:
        data = [_CHARSET.index(c) for c in rest]
    except ValueError:
        raise Bech32Error("invalid character") from None
    if _polymod(_hrp_expand(hrp) + data) != 1:
        raise Bech32Error("bad checksum")
    return hrp, bytes(_convert_bits(data[:-6], 5, 8, pad=False))


def encode(hrp: str, payload: bytes) -> str:
    data = _convert_bits(list(payload), 8, 5, pad=True)
    values = _hrp_expand(hrp) + data
    checksum = _polymod([*values, 0, 0, 0, 0, 0, 0]) ^ 1
    data += [(checksum >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(_CHARSET[d] for d in data)
