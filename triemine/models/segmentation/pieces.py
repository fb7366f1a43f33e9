"""Sentencepiece models as data: reading a source model, writing a recovered unigram model,
segmenting with it (n-best) and turning piece sequences back into text."""
from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from typing import Sequence

from triemine.errors import InputError

SPACE = "\u2581"
UNK, BOS, EOS = "<unk>", "<s>", "</s>"
SPECIALS = (UNK, BOS, EOS, "<pad>")
# Han characters (a piece class of the refinement's features; source-side digits/punctuation).
HAN = re.compile(r"[\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3400-\u4dbf\u4e00-\u9fff"
                 r"\uf900-\ufaff\U00020000-\U0003134f]")


def find_source_spm(model_dir: Path) -> Path:
    """The source-side sentencepiece model shipped with a CTranslate2 model directory."""
    model_dir = Path(model_dir)
    for name in ("source.spm", "sentencepiece.model", "source.model", "spm.model"):
        if (model_dir / name).is_file():
            return model_dir / name
    raise InputError("no source sentencepiece model (source.spm, sentencepiece.model, "
                     "source.model or spm.model)", model_dir)


def load_model_proto(path: Path):
    """Parse a sentencepiece model file into its ``ModelProto``."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    proto = pb.ModelProto()
    try:
        proto.ParseFromString(Path(path).read_bytes())
    except Exception as exc:  # protobuf's DecodeError and friends
        raise InputError(f"not a sentencepiece model: {exc}", path) from None
    if not proto.pieces:
        raise InputError("not a sentencepiece model (no pieces)", path)
    return proto


def build_proto(template, scores: dict[str, float], *, description: str = ""):
    """A unigram ``ModelProto``: the template's normaliser, ``<unk> <s> </s>`` as ids 0-2, then
    ``scores``' pieces (best first); no byte fallback, so unknown characters encode to id 0."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.CopyFrom(template)
    del proto.pieces[:]
    for name, kind in ((UNK, pb.ModelProto.SentencePiece.UNKNOWN),
                       (BOS, pb.ModelProto.SentencePiece.CONTROL),
                       (EOS, pb.ModelProto.SentencePiece.CONTROL)):
        sp = proto.pieces.add()
        sp.piece, sp.score, sp.type = name, 0.0, kind
    for piece, score in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])):
        sp = proto.pieces.add()
        sp.piece, sp.score, sp.type = piece, float(score), pb.ModelProto.SentencePiece.NORMAL
    ts = proto.trainer_spec
    ts.model_type = pb.TrainerSpec.UNIGRAM
    ts.vocab_size = len(proto.pieces)
    ts.byte_fallback = False
    ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id = 0, 1, 2, -1
    ts.unk_piece, ts.bos_piece, ts.eos_piece = UNK, BOS, EOS
    del ts.input[:]
    ts.input.append("recovered-by-triemine")
    ts.model_prefix = description or "triemine-recovered-target"
    return proto


def write_proto(proto, path: Path) -> Path:
    """Write ``proto`` to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(proto.SerializeToString())
    os.replace(tmp, path)
    return path


def processor(proto):
    """A ``SentencePieceProcessor`` over an in-memory ``ModelProto``."""
    import sentencepiece as spm
    return spm.SentencePieceProcessor(model_proto=proto.SerializeToString())


def detokenize(pieces: Sequence[str]) -> str:
    """Text of a target piece sequence, as sentencepiece's decoder writes it."""
    return "".join(pieces).replace(SPACE, " ").strip(" ")


def alignable(pieces: Sequence[str]) -> bool:
    """Pieces a unigram model could reproduce from their detokenised text."""
    if not pieces or any(p in (UNK, BOS, EOS) or not p for p in pieces):
        return False
    joined = "".join(pieces)
    if not joined.startswith(SPACE) or (SPACE + SPACE) in joined or joined.endswith(SPACE):
        return False
    return unicodedata.normalize("NFKC", joined) == joined


def _distinct_nbest(sp, text: str, k: int, as_ids: bool) -> list[list]:
    """Up to ``k`` distinct segmentations of ``text`` (pieces or ids), best first."""
    if k <= 1:
        return [sp.encode(text, out_type=int if as_ids else str)]
    nbest = sp.nbest_encode_as_ids if as_ids else sp.nbest_encode_as_pieces
    seen, out = set(), []
    for seg in nbest(text, k):
        key = tuple(seg)
        if key not in seen:
            seen.add(key)
            out.append(list(seg))
    return out


def nbest_segmentations(sp, text: str, k: int) -> list[list[str]]:
    """Up to ``k`` distinct segmentations of ``text``, best first (``k=1``: Viterbi)."""
    return _distinct_nbest(sp, text, k, as_ids=False)


def nbest_ids(sp, text: str, k: int) -> list[list[int]]:
    """Like :func:`nbest_segmentations` but sentencepiece ids (unknown characters are id 0)."""
    return _distinct_nbest(sp, text, k, as_ids=True)
