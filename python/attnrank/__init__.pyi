"""Typing stubs of the attnrank package (docs/python.md). Every function returns the
document of the matching ``attnrank COMMAND --json`` (docs/schema/) as Python objects."""
import os
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from ._attnrank import ExactMatrix

Exact = Union[npt.ArrayLike, Sequence[Sequence[Any]], ExactMatrix]
MaskArg = Union[None, Literal["causal", "none"], npt.ArrayLike]
Tensor = Any  # a NumPy array or a torch.Tensor of 2 to 4 dimensions
Document = Dict[str, Any]

__all__: List[str]
__version__: str

class InputWarning(UserWarning): ...

def exact_matrix(value: Exact, name: str = ..., *, max_size: Optional[int] = ...) -> ExactMatrix: ...
def reach(A: Exact, d_k: int, *, epsilon: Optional[float] = ..., mask: MaskArg = ..., x: Optional[Exact] = ...,
          bits: int = ..., seed: int = ..., full_floor: bool = ..., refine: Optional[bool] = ...,
          time_limit: Optional[float] = ..., max_size: Optional[int] = ...) -> Document: ...
def check_certificate(A: Exact, certificate: Dict[str, Any], *, mask: MaskArg = ...,
                      x: Optional[Exact] = ..., max_size: Optional[int] = ...) -> Document: ...
def width(A: Exact, epsilon: float, *, max_dk: Optional[int] = ..., mask: MaskArg = ..., seed: int = ...,
          refine: Optional[bool] = ..., time_limit: Optional[float] = ..., search: Optional[bool] = ...,
          max_size: Optional[int] = ...) -> Document: ...
def rank(M: Exact, mode: Literal["exact", "certified", "numeric"] = ..., *, bits: int = ...,
         tol: Optional[float] = ..., top: Optional[int] = ..., max_size: Optional[int] = ...) -> Document: ...
def det(M: Exact, mode: Literal["exact", "certified"] = ..., *, bits: int = ..., digits: int = ...,
        max_size: Optional[int] = ...) -> Document: ...
def svd(M: Exact, top: Optional[int] = ..., *, gaps: bool = ..., max_size: Optional[int] = ...) -> Document: ...
def layer(x: Exact, wq: Exact, wk: Exact, wv: Exact, wo: Exact, heads: int, *,
          tier: Literal["double", "certified-double", "mp", "interval"] = ..., digits: Optional[int] = ...,
          significant: Optional[int] = ...,
          mask: Union[MaskArg, Sequence[MaskArg]] = ..., bits: Optional[int] = ...,
          max_size: Optional[int] = ...) -> Document: ...
def check_kernel(q: Tensor, k: Tensor, v: Tensor, candidate: Optional[Tensor] = ...,
                 reference: Optional[Tensor] = ..., *, dout: Optional[Tensor] = ..., dq: Optional[Tensor] = ...,
                 dk: Optional[Tensor] = ..., dv: Optional[Tensor] = ..., lse: Optional[Tensor] = ...,
                 dsinks: Optional[Tensor] = ...,
                 reference_dq: Optional[Tensor] = ..., reference_dk: Optional[Tensor] = ...,
                 reference_dv: Optional[Tensor] = ..., reference_lse: Optional[Tensor] = ...,
                 reference_dsinks: Optional[Tensor] = ...,
                 mask: MaskArg = ..., window_size: Optional[Tuple[int, int]] = ...,
                 alignment: Literal["bottom-right", "top-left"] = ..., softcap: float = ...,
                 alibi_slopes: Optional[Tensor] = ..., sinks: Optional[Tensor] = ...,
                 attn_bias: Optional[Tensor] = ..., fp8_format: Optional[Literal["e4m3", "e5m2"]] = ...,
                 q_descale: Optional[Tensor] = ..., k_descale: Optional[Tensor] = ...,
                 v_descale: Optional[Tensor] = ..., dropout_mask: Optional[Tensor] = ...,
                 dropout_p: float = ..., cu_seqlens_q: Optional[Tensor] = ...,
                 cu_seqlens_k: Optional[Tensor] = ..., max_seqlen_q: Optional[int] = ...,
                 max_seqlen_k: Optional[int] = ...,
                 empty_rows: Literal["refuse", "zero"] = ..., scale: Optional[float] = ...,
                 fallback: Literal["auto", "never", "always"] = ...,
                 bits: Optional[int] = ..., max_error: Optional[float] = ..., rtol: Optional[float] = ...,
                 max_ratio: Optional[float] = ..., ratio_atol: Optional[float] = ...,
                 max_size: Optional[int] = ..., causal: bool = ...,
                 softmax_scale: Optional[float] = ..., layout: Literal["bhsd", "bshd"] = ...,
                 profile: Union[str, "os.PathLike[str]", Dict[str, Any], None] = ...,
                 max_ulps: Optional[float] = ...) -> Document: ...
def from_torch(module: Any) -> Dict[str, Any]: ...
def scan(tensor: Tensor, *, d_k: Optional[int] = ..., epsilon: Optional[float] = ..., mask: MaskArg = ...,
         jobs: Optional[int] = ..., client: Any = ..., max_dk: Optional[int] = ..., seed: int = ...,
         refine: Optional[bool] = ..., time_limit: Optional[float] = ..., heads_per_task: int = ...) -> List[Document]: ...
Adapter = Any  # a callable (model, x) -> per layer (q, k), {"q", "k", "scale"} or {"scores"}
def mha_adapter(model: Any, x: Any) -> List[Tuple[Any, Any]]: ...
def gpt2_adapter(model: Any, x: Any) -> List[Tuple[Any, Any]]: ...
def attention_patterns(model: Any, x: Any, *, mask: MaskArg = ..., heads: Optional[int] = ...,
                       adapter: Optional[Adapter] = ...) -> Any: ...
def scan_model(model: Any, x: Any, *, mask: MaskArg = ..., heads: Optional[int] = ...,
               adapter: Optional[Adapter] = ..., **scan_options: Any) -> List[Document]: ...
def save_safetensors(path: str, tensors: Dict[str, Any], metadata: Optional[Dict[str, str]] = ...) -> None: ...
def scan_frame(rows: Sequence[Document]) -> Any: ...
def scan_heatmap(rows: Sequence[Document], *, epsilon: Optional[float] = ..., d_k: Optional[int] = ...,
                 mask: MaskArg = ..., title: str = ..., ax: Any = ...) -> Any: ...
def scan_brackets(rows: Union[Sequence[Document], Dict[float, Sequence[Document]]], *,
                  epsilon: Optional[float] = ..., title: str = ..., ax: Any = ...) -> Any: ...
