# AOT ID: ['0_inference']
from ctypes import c_void_p, c_long, c_int
import torch
import math
import random
import os
import tempfile
from math import inf, nan
from cmath import nanj
from torch._inductor.hooks import run_intermediate_hooks
from torch._inductor.utils import maybe_profile
from torch._inductor.codegen.memory_planning import _align as align
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels
import triton
import triton.language as tl
from torch._inductor.runtime.triton_heuristics import start_graph, end_graph
from torch._C import _cuda_getCurrentRawStream as get_raw_stream

aten = torch.ops.aten
inductor_ops = torch.ops.inductor
_quantized = torch.ops._quantized
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
assert_alignment = torch._C._dynamo.guards.assert_alignment
empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
empty_strided_cpu_pinned = torch._C._dynamo.guards._empty_strided_cpu_pinned
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
empty_strided_xpu = torch._C._dynamo.guards._empty_strided_xpu
empty_strided_mtia = torch._C._dynamo.guards._empty_strided_mtia
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
alloc_from_pool = torch.ops.inductor._alloc_from_pool
async_compile = AsyncCompile()
empty_strided_p2p = torch._C._distributed_c10d._SymmetricMemory.empty_strided_p2p


# kernel path: /tmp/torchinductor_root/ji/cjitmgecq2d7knoxcs4gxz6wpvlvzgjdl7ladj2msy33gmdeefix.py
# Topologically Sorted Source Nodes: [getitem_4, expand_1, inv_freq_expanded], Original ATen: [aten.unsqueeze, aten.expand, aten._to_copy]
# Source node to ATen node mapping:
#   expand_1 => expand_1
#   getitem_4 => unsqueeze_6, unsqueeze_7
#   inv_freq_expanded => convert_element_type
# Graph fragment:
#   %arg4_1 : Tensor "bf16[32][1]cuda:0" = PlaceHolder[target=arg4_1]
#   %unsqueeze_6 : Tensor "bf16[1, 32][32, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%arg4_1, 0), kwargs = {})
#   %unsqueeze_7 : Tensor "bf16[1, 32, 1][32, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_6, 2), kwargs = {})
#   %expand_1 : Tensor "bf16[1, 32, 1][32, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.expand.default](args = (%unsqueeze_7, [1, -1, 1]), kwargs = {})
#   %convert_element_type : Tensor "f32[1, 32, 1][32, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%expand_1, torch.float32), kwargs = {})
#   return %expand_2
triton_poi_fused__to_copy_expand_unsqueeze_0 = async_compile.triton('triton_poi_fused__to_copy_expand_unsqueeze_0', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 32}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__to_copy_expand_unsqueeze_0', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 320}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_expand_unsqueeze_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 32
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask).to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp1, xmask)
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/yr/cyrbwri2mzqm3bzowcwvz6spstgtxhimqqbf2f2ztg3ealq3huhx.py
# Topologically Sorted Source Nodes: [getitem_4, expand_1, inv_freq_expanded, matmul, getitem_5, position_ids_expanded], Original ATen: [aten.unsqueeze, aten.expand, aten._to_copy, aten.bmm]
# Source node to ATen node mapping:
#   expand_1 => expand_1
#   getitem_4 => unsqueeze_6, unsqueeze_7
#   getitem_5 => unsqueeze_8
#   inv_freq_expanded => convert_element_type
#   matmul => mm_default, squeeze_dim, squeeze_dim_1
#   position_ids_expanded => convert_element_type_1
# Graph fragment:
#   %arg2_1 : Tensor "i64[1, 1][1, 1]cuda:0" = PlaceHolder[target=arg2_1]
#   %expand_3 : Tensor "f32[1, 1, 1][1, 1, 1]cuda:0" = PlaceHolder[target=expand_3]
#   %unsqueeze_6 : Tensor "bf16[1, 32][32, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%arg4_1, 0), kwargs = {})
#   %unsqueeze_7 : Tensor "bf16[1, 32, 1][32, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_6, 2), kwargs = {})
#   %expand_1 : Tensor "bf16[1, 32, 1][32, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.expand.default](args = (%unsqueeze_7, [1, -1, 1]), kwargs = {})
#   %convert_element_type : Tensor "f32[1, 32, 1][32, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%expand_1, torch.float32), kwargs = {})
#   %squeeze_dim : Tensor "f32[32, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.squeeze.dim](args = (%expand_2, 0), kwargs = {})
#   %unsqueeze_8 : Tensor "i64[1, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%arg2_1, 1), kwargs = {})
#   %convert_element_type_1 : Tensor "f32[1, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%unsqueeze_8, torch.float32), kwargs = {})
#   %squeeze_dim_1 : Tensor "f32[1, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.squeeze.dim](args = (%expand_3, 0), kwargs = {})
#   %mm_default : Tensor "f32[32, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mm.default](args = (%squeeze_dim, %squeeze_dim_1), kwargs = {})
#   return %expand_3,%buf3
triton_poi_fused__to_copy_bmm_expand_unsqueeze_1 = async_compile.triton('triton_poi_fused__to_copy_bmm_expand_unsqueeze_1', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 1}, 
    filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*fp32', 'in_ptr0': '*i64', 'xnumel': 'constexpr', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {'xnumel': 1}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__to_copy_bmm_expand_unsqueeze_1', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_bmm_expand_unsqueeze_1(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 1
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    tmp0 = tl.load(in_ptr0 + (0))
    tmp1 = tl.broadcast_to(tmp0, [XBLOCK])
    tmp2 = tmp1.to(tl.float32)
    tl.store(in_out_ptr0 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to(XBLOCK)), tmp2, None)
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/rb/crbc75bd5fjgdionbksgaaw6yykeimkbh3mhronppws44oqfczhi.py
# Topologically Sorted Source Nodes: [matmul, freqs, emb, cos, cos_1, cos_2, cos_3, sin, sin_1, sin_2, sin_3], Original ATen: [aten.bmm, aten.transpose, aten.cat, aten.cos, aten.mul, aten._to_copy, aten.unsqueeze, aten.sin]
# Source node to ATen node mapping:
#   cos => cos
#   cos_1 => mul
#   cos_2 => convert_element_type_2
#   cos_3 => unsqueeze_10
#   emb => clone, expand_4, unsqueeze_9, view_3
#   freqs => permute
#   matmul => unsqueeze_default
#   sin => sin
#   sin_1 => mul_1
#   sin_2 => convert_element_type_3
#   sin_3 => unsqueeze_11
# Graph fragment:
#   %mm_default : Tensor "f32[32, 1][1, 1]cuda:0" = PlaceHolder[target=mm_default]
#   %unsqueeze_default : Tensor "f32[1, 32, 1][32, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%mm_default, 0), kwargs = {})
#   %permute : Tensor "f32[1, 1, 32][32, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%unsqueeze_default, [0, 2, 1]), kwargs = {})
#   %unsqueeze_9 : Tensor "f32[1, 1, 1, 32][32, 1, 32, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%permute, 2), kwargs = {})
#   %expand_4 : Tensor "f32[1, 1, 2, 32][32, 1, 0, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.expand.default](args = (%unsqueeze_9, [1, 1, 2, 32]), kwargs = {})
#   %clone : Tensor "f32[1, 1, 2, 32][64, 64, 32, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clone.default](args = (%expand_4,), kwargs = {memory_format: torch.contiguous_format})
#   %view_3 : Tensor "f32[1, 1, 64][64, 64, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.reshape.default](args = (%clone, [1, 1, 64]), kwargs = {})
#   %cos : Tensor "f32[1, 1, 64][64, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.cos.default](args = (%view_3,), kwargs = {})
#   %mul : Tensor "f32[1, 1, 64][64, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%cos, 1.0), kwargs = {})
#   %convert_element_type_2 : Tensor "bf16[1, 1, 64][64, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul, torch.bfloat16), kwargs = {})
#   %unsqueeze_10 : Tensor "bf16[1, 1, 1, 64][64, 64, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%convert_element_type_2, 1), kwargs = {})
#   %reshape_default_65 : Tensor "bf16[1, 64][64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%expand_default, [1, 64]), kwargs = {})
#   %inductor_force_stride_order_default_1 : Tensor "bf16[1, 64][64, 1]cuda:0"[num_users=16] = call_function[target=torch.ops.prims.inductor_force_stride_order.default](args = (%reshape_default_65, [64, 1]), kwargs = {})
#   %sin : Tensor "f32[1, 1, 64][64, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sin.default](args = (%view_3,), kwargs = {})
#   %mul_1 : Tensor "f32[1, 1, 64][64, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sin, 1.0), kwargs = {})
#   %convert_element_type_3 : Tensor "bf16[1, 1, 64][64, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_1, torch.bfloat16), kwargs = {})
#   %unsqueeze_11 : Tensor "bf16[1, 1, 1, 64][64, 64, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%convert_element_type_3, 1), kwargs = {})
#   %reshape_default_66 : Tensor "bf16[1, 64][64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%expand_default_1, [1, 64]), kwargs = {})
#   %inductor_force_stride_order_default_2 : Tensor "bf16[1, 64][64, 1]cuda:0"[num_users=16] = call_function[target=torch.ops.prims.inductor_force_stride_order.default](args = (%reshape_default_66, [64, 1]), kwargs = {})
#   return %inductor_force_stride_order_default_1,%inductor_force_stride_order_default_2
triton_poi_fused__to_copy_bmm_cat_cos_mul_sin_transpose_unsqueeze_2 = async_compile.triton('triton_poi_fused__to_copy_bmm_cat_cos_mul_sin_transpose_unsqueeze_2', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 64}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*bf16', 'out_ptr1': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__to_copy_bmm_cat_cos_mul_sin_transpose_unsqueeze_2', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 2, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 640}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_bmm_cat_cos_mul_sin_transpose_unsqueeze_2(in_ptr0, out_ptr0, out_ptr1, xnumel, XBLOCK : tl.constexpr):
    xnumel = 64
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + ((x0 % 32)), xmask)
    tmp1 = tl_math.cos(tmp0)
    tmp2 = tl.full([1], 1.0, tl.float32)
    tmp3 = tmp1 * tmp2
    tmp4 = tmp3.to(tl.float32)
    tmp5 = tl_math.sin(tmp0)
    tmp6 = tmp5 * tmp2
    tmp7 = tmp6.to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp4, xmask)
    tl.store(out_ptr1 + (x0), tmp7, xmask)
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/bd/cbdkwgnlcgz7mtasa676u452f52iwngzafx5wfufpgxf2jelj7ur.py
# Topologically Sorted Source Nodes: [inputs_embeds, arange_4, cache_position, transpose_5, reshape_2, attn_output_3], Original ATen: [aten.embedding, aten.arange, aten.add, aten.transpose, aten.view]
# Source node to ATen node mapping:
#   arange_4 => iota_4
#   attn_output_3 => view_22
#   cache_position => add_5
#   inputs_embeds => embedding
#   reshape_2 => view_21
#   transpose_5 => permute_8
# Graph fragment:
#   %arg0_1 : Tensor "i64[1, 1][1, 1]cuda:0" = PlaceHolder[target=arg0_1]
#   %arg1_1 : Tensor "bf16[128256, 2048][2048, 1]cuda:0" = PlaceHolder[target=arg1_1]
#   %embedding : Tensor "bf16[1, 1, 2048][2048, 2048, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.embedding.default](args = (%arg1_1, %arg0_1), kwargs = {})
#   %reshape_default_64 : Tensor "bf16[1, 2048][2048, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%embedding, [1, 2048]), kwargs = {})
#   %iota_4 : Tensor "i64[1][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.iota.default](args = (1,), kwargs = {start: 0, step: 1, dtype: torch.int64, device: cuda:0, requires_grad: False})
#   %add_5 : Tensor "i64[1][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%iota_4, %arg3_1), kwargs = {})
#   %triton_kernel_wrapper_mutation_95 : [num_users=0] = call_function[target=torch.ops.higher_order.triton_kernel_wrapper_mutation](args = (), kwargs = {kernel_idx: 36, constant_args_idx: 64, grid: [(384, 1, 1)], tma_descriptor_metadata: {}, kwargs: {X: %reshape_default_64, NW: %arg5_1, W0: %arg6_1, W1: %arg7_1, W2: %arg8_1, COS: %inductor_force_stride_order_default_1, SIN: %inductor_force_stride_order_default_2, Y: %empty_96, C1: %arg9_1, C2: %arg10_1, IDX: %add_5, M: 1, K: 2048, N0: 2048, N1: 512, N2: 512, stride_x: 2048, stride_r: 0, stride_y: 3072, stride_cs: 64, eps: 1e-05, norm_offset: 0.0, rope_dim: 64, rope_weights: 2, seq_len: 1, cache_len: 1280, head_dim: 64, sc_b: 655360, sc_h: 81920, sc_l: 64, sc_d: 1, CONCAT_W: 3, HAS_NORM: True, NORM_CAST: True, NORM_OFFSET: False, SILU_MUL: False, HAS_RES: False, ROPE: True, CACHE_MASK: 6, BLOCK_M: 1, IEEE_F32: False}})
#   %permute_8 : Tensor "bf16[1, 1, 32, 64][2048, 64, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%empty, [0, 2, 1, 3]), kwargs = {})
#   %view_21 : Tensor "bf16[1, 1, 2048][2048, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%permute_8, [1, 1, -1]), kwargs = {})
#   %view_22 : Tensor "bf16[1, 2048][2048, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%view_21, [1, 2048]), kwargs = {})
#   %reshape_default : Tensor "bf16[1, 2048][2048, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%embedding, [1, 2048]), kwargs = {})
#   %triton_kernel_wrapper_mutation_92 : [num_users=0] = call_function[target=torch.ops.higher_order.triton_kernel_wrapper_mutation](args = (), kwargs = {kernel_idx: 34, constant_args_idx: 32, grid: [(1024, 1, 1)], tma_descriptor_metadata: {}, kwargs: {X: %view_22, W0: %arg11_1, W1: %arg11_1, W2: %arg11_1, R: %reshape_default, Y: %empty_64, M: 1, K: 2048, N0: 2048, N1: 0, N2: 0, stride_x: 2048, stride_r: 2048, stride_y: 2048, stride_cs: 0, eps: 0.0, norm_offset: 0.0, rope_dim: 0, rope_weights: 0, seq_len: 1, cache_len: 0, head_dim: 1, sc_b: 0, sc_h: 0, sc_l: 0, sc_d: 0, CONCAT_W: 1, HAS_NORM: False, NORM_CAST: False, NORM_OFFSET: False, SILU_MUL: False, HAS_RES: True, ROPE: False, CACHE_MASK: 0, BLOCK_M: 1, IEEE_F32: False}})
#   return %buf7,%buf22
triton_poi_fused_add_arange_embedding_transpose_view_3 = async_compile.triton('triton_poi_fused_add_arange_embedding_transpose_view_3', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 2048}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*i64', 'in_ptr1': '*bf16', 'out_ptr0': '*bf16', 'out_ptr1': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused_add_arange_embedding_transpose_view_3', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 2, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 16384}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_add_arange_embedding_transpose_view_3(in_ptr0, in_ptr1, out_ptr0, out_ptr1, xnumel, XBLOCK : tl.constexpr):
    xnumel = 2048
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (0))
    tmp1 = tl.broadcast_to(tmp0, [XBLOCK])
    tmp2 = tl.full([XBLOCK], 128256, tl.int32)
    tmp3 = tmp1 + tmp2
    tmp4 = tmp1 < 0
    tmp5 = tl.where(tmp4, tmp3, tmp1)
    tl.device_assert((0 <= tmp5) & (tmp5 < 128256), "index out of bounds: 0 <= tmp5 < 128256")
    tmp7 = tl.load(in_ptr1 + (x0 + 2048*tmp5), xmask).to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp7, xmask)
    tl.store(out_ptr1 + (x0), tmp7, xmask)
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/6x/c6xr2l7ed4dlsoxfqgvfronbmsibxhccdypvnrjclp3xlahxdf4j.py
# Topologically Sorted Source Nodes: [inputs_embeds, arange_4, cache_position], Original ATen: [aten.embedding, aten.arange, aten.add]
# Source node to ATen node mapping:
#   arange_4 => iota_4
#   cache_position => add_5
#   inputs_embeds => embedding
# Graph fragment:
#   %getitem_160 : Tensor "i64[][]cuda:0" = PlaceHolder[target=getitem_160]
#   %embedding : Tensor "bf16[1, 1, 2048][2048, 2048, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.embedding.default](args = (%arg1_1, %arg0_1), kwargs = {})
#   %reshape_default_64 : Tensor "bf16[1, 2048][2048, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%embedding, [1, 2048]), kwargs = {})
#   %iota_4 : Tensor "i64[1][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.iota.default](args = (1,), kwargs = {start: 0, step: 1, dtype: torch.int64, device: cuda:0, requires_grad: False})
#   %add_5 : Tensor "i64[1][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%iota_4, %arg3_1), kwargs = {})
#   %triton_kernel_wrapper_mutation_95 : [num_users=0] = call_function[target=torch.ops.higher_order.triton_kernel_wrapper_mutation](args = (), kwargs = {kernel_idx: 36, constant_args_idx: 64, grid: [(384, 1, 1)], tma_descriptor_metadata: {}, kwargs: {X: %reshape_default_64, NW: %arg5_1, W0: %arg6_1, W1: %arg7_1, W2: %arg8_1, COS: %inductor_force_stride_order_default_1, SIN: %inductor_force_stride_order_default_2, Y: %empty_96, C1: %arg9_1, C2: %arg10_1, IDX: %add_5, M: 1, K: 2048, N0: 2048, N1: 512, N2: 512, stride_x: 2048, stride_r: 0, stride_y: 3072, stride_cs: 64, eps: 1e-05, norm_offset: 0.0, rope_dim: 64, rope_weights: 2, seq_len: 1, cache_len: 1280, head_dim: 64, sc_b: 655360, sc_h: 81920, sc_l: 64, sc_d: 1, CONCAT_W: 3, HAS_NORM: True, NORM_CAST: True, NORM_OFFSET: False, SILU_MUL: False, HAS_RES: False, ROPE: True, CACHE_MASK: 6, BLOCK_M: 1, IEEE_F32: False}})
#   return %buf8
triton_poi_fused_add_arange_embedding_4 = async_compile.triton('triton_poi_fused_add_arange_embedding_4', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 1}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*i64', 'out_ptr0': '*i64', 'xnumel': 'constexpr', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {'xnumel': 1}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused_add_arange_embedding_4', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_add_arange_embedding_4(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 1
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    tmp0 = tl.load(in_ptr0 + (0))
    tmp1 = tl.broadcast_to(tmp0, [XBLOCK])
    tmp2 = tl.full([1], 0, tl.int64)
    tmp3 = tmp2 + tmp1
    tl.store(out_ptr0 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to(XBLOCK)), tmp3, None)
''', device_str='cuda')


# Original path: /work/main/fusion_passes/kernels/gemv.py:117
_gemv_kernel_0 = async_compile.triton('_gemv_kernel', '''

import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties

@triton_heuristics.user_autotune(
    configs=[{'BLOCK_N': 4, 'BLOCK_K': 1024, 'PREFETCH': False, 'num_warps': 4, 'num_stages': 3}],
    inductor_meta={'grid_type': 'FixedGrid', 'fixed_grid': ['_grid_0', '_grid_1', '_grid_2'], 'extra_launcher_args': ['_grid_0', '_grid_1', '_grid_2'], 'kernel_name': '_gemv_kernel_0', 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False},
    triton_meta={'signature': {'X': '*bf16', 'NW': '*bf16', 'W0': '*bf16', 'W1': '*bf16', 'W2': '*bf16', 'R': 'constexpr', 'COS': '*bf16', 'SIN': '*bf16', 'Y': '*bf16', 'C0': 'constexpr', 'C1': '*bf16', 'C2': '*bf16', 'IDX': '*i64', 'M': 'constexpr', 'K': 'i32', 'N0': 'i32', 'N1': 'i32', 'N2': 'i32', 'stride_x': 'i32', 'stride_r': 'i32', 'stride_y': 'i32', 'stride_cs': 'i32', 'eps': 'fp64', 'norm_offset': 'fp64', 'rope_dim': 'i32', 'rope_weights': 'i32', 'seq_len': 'constexpr', 'cache_len': 'i32', 'head_dim': 'i32', 'sc_b': 'i32', 'sc_h': 'i32', 'sc_l': 'i32', 'sc_d': 'constexpr', 'CONCAT_W': 'constexpr', 'HAS_NORM': 'constexpr', 'NORM_CAST': 'constexpr', 'NORM_OFFSET': 'constexpr', 'SILU_MUL': 'constexpr', 'HAS_RES': 'constexpr', 'ROPE': 'constexpr', 'CACHE_MASK': 'constexpr', 'BLOCK_M': 'constexpr', 'BLOCK_N': 'constexpr', 'BLOCK_K': 'constexpr', 'PREFETCH': 'constexpr', 'IEEE_F32': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {'R': None, 'C0': None, 'M': 1, 'seq_len': 1, 'sc_d': 1, 'CONCAT_W': 3, 'HAS_NORM': True, 'NORM_CAST': True, 'NORM_OFFSET': False, 'SILU_MUL': False, 'HAS_RES': False, 'ROPE': True, 'CACHE_MASK': 6, 'BLOCK_M': 1, 'IEEE_F32': False}, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (10,): [['tt.divisibility', 16]], (11,): [['tt.divisibility', 16]], (12,): [['tt.divisibility', 16]], (14,): [['tt.divisibility', 16]], (15,): [['tt.divisibility', 16]], (16,): [['tt.divisibility', 16]], (17,): [['tt.divisibility', 16]], (18,): [['tt.divisibility', 16]], (19,): [['tt.divisibility', 16]], (20,): [['tt.divisibility', 16]], (21,): [['tt.divisibility', 16]], (24,): [['tt.divisibility', 16]], (27,): [['tt.divisibility', 16]], (28,): [['tt.divisibility', 16]], (29,): [['tt.divisibility', 16]], (30,): [['tt.divisibility', 16]], (31,): [['tt.divisibility', 16]]}]},
    filename=__file__,
    custom_kernel=True,
)
@triton.jit
def _gemv_kernel(
    X,  # [M, K] input, dtype T, row stride stride_x
    NW,  # [K] norm weight (None unless HAS_NORM)
    W0,  # [N0, K] contiguous
    W1,  # [N1, K] (second concatenated weight, or the up projection when SILU_MUL; else W0)
    W2,  # [N2, K] (third concatenated weight; else W0)
    R,  # [M, N0] residual (None unless HAS_RES)
    COS,  # [M, rope_dim] (None unless ROPE)
    SIN,  # [M, rope_dim] (None unless ROPE)
    Y,  # [M, N_out] output, row stride stride_y
    C0,  # [B, H_0, L, HD] KV cache output 0's heads are also written to (None unless CACHE_MASK & 1)
    C1,  # ... output 1's (None unless CACHE_MASK & 2)
    C2,  # ... output 2's (None unless CACHE_MASK & 4)
    IDX,  # [S] cache positions of a batch's S rows (None unless CACHE_MASK)
    M,
    K,
    N0,
    N1,
    N2,
    stride_x,
    stride_r,
    stride_y,
    stride_cs,  # row stride of COS and SIN
    eps,
    norm_offset,
    rope_dim,
    rope_weights,  # the first rope_weights weights' outputs are rotated
    seq_len,  # S: output row m is token m % S of sequence m // S (cache writes only)
    cache_len,  # L
    head_dim,  # HD: cache head h holds output columns h * HD .. (h + 1) * HD
    sc_b,  # the caches' strides (every cache has the same layout)
    sc_h,
    sc_l,
    sc_d,
    CONCAT_W: tl.constexpr,  # 1-3 weights whose outputs are concatenated (1 with SILU_MUL / HAS_RES)
    HAS_NORM: tl.constexpr,
    NORM_CAST: tl.constexpr,
    NORM_OFFSET: tl.constexpr,
    SILU_MUL: tl.constexpr,
    HAS_RES: tl.constexpr,
    ROPE: tl.constexpr,  # programs own column pairs (j, j + rope_dim/2) of every weight
    CACHE_MASK: tl.constexpr,  # bit i: output i's heads are written into C_i at IDX (a KV-cache update)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PREFETCH: tl.constexpr,  # M = 1 only: load the next K tile while reducing this one
    IEEE_F32: tl.constexpr,  # fp32: the 16-row tile's dots in full precision, not TF32 (kernels.ieee_fp32_dot)
):
    T = X.dtype.element_ty
    PRECISION: tl.constexpr = "ieee" if IEEE_F32 else None  # None: Triton's default (TF32 for fp32)
    pid = tl.program_id(0)
    # which weight this program's columns come from (the grid covers cdiv(N0)+cdiv(N1)+cdiv(N2) blocks)
    PAIR: tl.constexpr = 2 if ROPE else 1  # output columns per program column
    w_ptr = W0
    blk = pid
    n_lim = N0 + pid * 0
    col0 = pid * 0
    w_idx = pid * 0
    if CONCAT_W >= 2:
        nb0 = tl.cdiv(N0 // PAIR, BLOCK_N)
        if pid >= nb0:
            w_ptr = W1
            blk = pid - nb0
            n_lim = N1 + pid * 0
            col0 = N0 + pid * 0
            w_idx = 1 + pid * 0
        if CONCAT_W == 3:
            nb01 = nb0 + tl.cdiv(N1 // PAIR, BLOCK_N)
            if pid >= nb01:
                w_ptr = W2
                blk = pid - nb01
                n_lim = N2 + pid * 0
                col0 = N0 + N1 + pid * 0
                w_idx = 2 + pid * 0

    rm = tl.arange(0, BLOCK_M)
    m_ok = rm < M
    rn = blk * BLOCK_N + tl.arange(0, BLOCK_N)
    if ROPE:  # program column t -> the pair (j, j + h) of head t // h, j = t % h
        half = rope_dim // 2
        n_ok = rn < n_lim // 2
        rj = rn % half
        rn = (rn // half) * rope_dim + rj
        w_rows2 = w_ptr + (rn + half).to(tl.int64)[:, None] * K
    else:
        n_ok = rn < n_lim
    w_rows = w_ptr + rn.to(tl.int64)[:, None] * K
    if SILU_MUL:
        w_rows2 = W1 + rn.to(tl.int64)[:, None] * K
    elif not ROPE:
        w_rows2 = w_rows  # never read: _load_tile loads a second weight only when TWO

    TWO: tl.constexpr = SILU_MUL or ROPE  # a second accumulator: the up projection, or the pair's other half
    if PREFETCH:  # the first weight tile is requested before the norm prologue, so HBM starts streaming at once
        x, w, u = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, 0, K, stride_x, TWO, BLOCK_K)
    if HAS_NORM:  # per-row 1/rms over the whole row (the row is small and L2-resident)
        ss = tl.zeros([BLOCK_M], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            xk = tl.load(X + rm[:, None] * stride_x + rk[None, :], mask=m_ok[:, None] & (rk[None, :] < K), other=0.0)
            xk = xk.to(tl.float32)
            ss += tl.sum(xk * xk, axis=1)
        rstd = tl.rsqrt(ss / K + eps)

    if BLOCK_M == 1:
        acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        if TWO:
            acc_u = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if TWO:
            acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)

    for k0 in range(0, K, BLOCK_K):
        if PREFETCH:
            x_nxt, w_nxt, u_nxt = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0 + BLOCK_K, K, stride_x, TWO,
                                             BLOCK_K)
        else:
            x, w, u = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0, K, stride_x, TWO, BLOCK_K)
        rk = k0 + tl.arange(0, BLOCK_K)
        k_ok = rk < K
        if HAS_NORM:
            xf = x.to(tl.float32) * rstd[:, None]
            if NORM_CAST:
                xf = xf.to(T).to(tl.float32)
            nw = tl.load(NW + rk, mask=k_ok, other=0.0).to(tl.float32)
            if NORM_OFFSET:
                nw = nw + norm_offset
            x = (xf * nw[None, :]).to(T)
        if BLOCK_M == 1:
            xr = x.to(tl.float32)  # [1, BLOCK_K] broadcasts over the BLOCK_N weight rows
            acc += w.to(tl.float32) * xr
            if TWO:
                acc_u += u.to(tl.float32) * xr
        else:
            acc = tl.dot(x, tl.trans(w), acc, input_precision=PRECISION)
            if TWO:
                acc_u = tl.dot(x, tl.trans(u), acc_u, input_precision=PRECISION)
        if PREFETCH:
            x, w, u = x_nxt, w_nxt, u_nxt

    if BLOCK_M == 1:
        y = tl.sum(acc, axis=1)[None, :]
        if TWO:
            y_u = tl.sum(acc_u, axis=1)[None, :]
    else:
        y = acc
        if TWO:
            y_u = acc_u
    y = y.to(T)  # the GEMM's output dtype, as eager rounds it
    out_mask = m_ok[:, None] & n_ok[None, :]
    if SILU_MUL:
        g = y.to(tl.float32)
        s = (g / (1.0 + tl.exp(-g))).to(T)
        y = (s.to(tl.float32) * y_u.to(T).to(tl.float32)).to(T)
    if HAS_RES:
        r = tl.load(R + rm[:, None] * stride_r + rn[None, :], mask=out_mask, other=0.0)
        y = (y.to(tl.float32) + r.to(tl.float32)).to(T)
    if ROPE:
        y2 = y_u.to(T)  # the pair's other half: columns j + h
        cs = rm[:, None] * stride_cs + rj[None, :]
        c1 = tl.load(COS + cs, mask=out_mask, other=0.0).to(tl.float32)
        s1 = tl.load(SIN + cs, mask=out_mask, other=0.0).to(tl.float32)
        c2 = tl.load(COS + cs + half, mask=out_mask, other=0.0).to(tl.float32)
        s2 = tl.load(SIN + cs + half, mask=out_mask, other=0.0).to(tl.float32)
        a, b = y.to(tl.float32), y2.to(tl.float32)
        ra = ((a * c1).to(T).to(tl.float32) + (-b * s1).to(T).to(tl.float32)).to(T)
        rb = ((b * c2).to(T).to(tl.float32) + (a * s2).to(T).to(tl.float32)).to(T)
        rotate = w_idx < rope_weights
        y = tl.where(rotate, ra, y)
        y2 = tl.where(rotate, rb, y2)
        tl.store(Y + rm[:, None] * stride_y + (col0 + rn + half)[None, :], y2, mask=out_mask)
    if CACHE_MASK != 0:
        _store_cache_rows(C0, C1, C2, IDX, y, rn, w_idx, rm, out_mask, seq_len, cache_len, head_dim, sc_b, sc_h,
                          sc_l, sc_d, CACHE_MASK)
        if ROPE:
            _store_cache_rows(C0, C1, C2, IDX, y2, rn + half, w_idx, rm, out_mask, seq_len, cache_len, head_dim,
                              sc_b, sc_h, sc_l, sc_d, CACHE_MASK)
    tl.store(Y + rm[:, None] * stride_y + (col0 + rn)[None, :], y, mask=out_mask)

@triton.jit
def _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0, K, stride_x, TWO: tl.constexpr, BLOCK_K: tl.constexpr):
    """Columns k0 .. k0 + BLOCK_K of x [BLOCK_M, BLOCK_K] and of the program's weight rows [BLOCK_N, BLOCK_K]
    (u: the second weight's rows when TWO, else w again); zeros past K."""
    rk = k0 + tl.arange(0, BLOCK_K)
    k_ok = rk < K
    x = tl.load(X + rm[:, None] * stride_x + rk[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
    w_mask = n_ok[:, None] & k_ok[None, :]
    w = tl.load(w_rows + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
    u = w
    if TWO:
        u = tl.load(w_rows2 + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
    return x, w, u

@triton.jit
def _store_cache_rows(C0, C1, C2, IDX, y, cols, w_idx, rm, mask, seq_len, cache_len, head_dim, sc_b, sc_h, sc_l,
                      sc_d, CACHE_MASK: tl.constexpr):
    """y [BLOCK_M, BLOCK_N] (rows rm, columns ``cols`` of output w_idx) into C_{w_idx}[b, col // HD, IDX[s],
    col % HD] for row m = b * S + s, as ``C.index_put_([None, None, IDX], heads)`` stores them: a negative
    position counts from the end; one past either end is skipped (eager raises there)."""
    pos = tl.load(IDX + rm % seq_len).to(tl.int64)  # in bounds for the masked rows too
    pos = tl.where(pos < 0, pos + cache_len, pos)
    ok = mask & ((pos >= 0) & (pos < cache_len))[:, None]
    off = ((rm // seq_len).to(tl.int64) * sc_b + pos * sc_l)[:, None] + \
        ((cols // head_dim).to(tl.int64) * sc_h + (cols % head_dim).to(tl.int64) * sc_d)[None, :]
    which = (cols * 0 + w_idx)[None, :]  # a vector, not the scalar: Triton's interpreter masks with no scalar
    if CACHE_MASK & 1:
        tl.store(C0 + off, y, mask=ok & (which == 0))
    if CACHE_MASK & 2:
        tl.store(C1 + off, y, mask=ok & (which == 1))
    if CACHE_MASK & 4:
        tl.store(C2 + off, y, mask=ok & (which == 2))
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/mk/cmkttq7e2ujn3nbjm7nt6nsrfdrwfwjfuchzahegcvpsmvoh6f3q.py
# Topologically Sorted Source Nodes: [arange_3, kv_arange, kv_indices, arange_2, q_arange, q_indices, attention_mask, attention_mask_1, tensor, mask], Original ATen: [aten.arange, aten.add, aten.unsqueeze, aten.le, aten.expand, aten.lift_fresh, aten.scalar_tensor, aten.where]
# Source node to ATen node mapping:
#   arange_2 => iota_2
#   arange_3 => iota_3
#   attention_mask => le
#   attention_mask_1 => expand
#   kv_arange => add_1
#   kv_indices => unsqueeze_3, unsqueeze_4, unsqueeze_5
#   mask => full_default_1, where
#   q_arange => add
#   q_indices => unsqueeze, unsqueeze_1, unsqueeze_2
#   tensor => full_default
# Graph fragment:
#   %getitem_160 : Tensor "i64[][]cuda:0" = PlaceHolder[target=getitem_160]
#   %iota_3 : Tensor "i64[1280][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.iota.default](args = (1280,), kwargs = {start: 0, step: 1, dtype: torch.int64, device: cuda:0, requires_grad: False})
#   %add_1 : Tensor "i64[1280][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%iota_3, 0), kwargs = {})
#   %unsqueeze_3 : Tensor "i64[1, 1280][1280, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%add_1, 0), kwargs = {})
#   %unsqueeze_4 : Tensor "i64[1, 1, 1280][1280, 1280, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_3, 1), kwargs = {})
#   %unsqueeze_5 : Tensor "i64[1, 1, 1, 1280][1280, 1280, 1280, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_4, 2), kwargs = {})
#   %iota_2 : Tensor "i64[1][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.iota.default](args = (1,), kwargs = {start: 0, step: 1, dtype: torch.int64, device: cuda:0, requires_grad: False})
#   %add : Tensor "i64[1][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%iota_2, %arg3_1), kwargs = {})
#   %unsqueeze : Tensor "i64[1, 1][1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%add, 0), kwargs = {})
#   %unsqueeze_1 : Tensor "i64[1, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze, 1), kwargs = {})
#   %unsqueeze_2 : Tensor "i64[1, 1, 1, 1][1, 1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.unsqueeze.default](args = (%unsqueeze_1, 3), kwargs = {})
#   %le : Tensor "b8[1, 1, 1, 1280][1280, 1280, 1280, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.le.Tensor](args = (%unsqueeze_5, %unsqueeze_2), kwargs = {})
#   %expand : Tensor "b8[1, 1, 1, 1280][1280, 1280, 1280, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.expand.default](args = (%le, [1, -1, 1, 1280]), kwargs = {})
#   %full_default : Tensor "bf16[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.full.default](args = ([], 0.0), kwargs = {dtype: torch.bfloat16, layout: torch.strided, device: cuda:0, pin_memory: False})
#   %full_default_1 : Tensor "bf16[][]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.full.default](args = ([], -3.3895313892515355e+38), kwargs = {dtype: torch.bfloat16, layout: torch.strided, device: cuda:0, pin_memory: False})
#   %where : Tensor "bf16[1, 1, 1, 1280][1280, 1280, 1280, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.where.self](args = (%expand, %full_default, %full_default_1), kwargs = {})
#   %inductor_force_stride_order_default : Tensor "bf16[1, 1, 1, 1280][1280, 1280, 1280, 1]cuda:0"[num_users=16] = call_function[target=torch.ops.prims.inductor_force_stride_order.default](args = (%where, [1280, 1280, 1280, 1]), kwargs = {})
#   return %inductor_force_stride_order_default
triton_poi_fused_add_arange_expand_le_lift_fresh_scalar_tensor_unsqueeze_where_5 = async_compile.triton('triton_poi_fused_add_arange_expand_le_lift_fresh_scalar_tensor_unsqueeze_where_5', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.pointwise(
    size_hints={'x': 2048}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*i64', 'out_ptr0': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused_add_arange_expand_le_lift_fresh_scalar_tensor_unsqueeze_where_5', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 5120}},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_add_arange_expand_le_lift_fresh_scalar_tensor_unsqueeze_where_5(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 1280
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (0))
    tmp1 = tl.broadcast_to(tmp0, [XBLOCK])
    tmp2 = tl.full([1], 0, tl.int64)
    tmp3 = tmp2 + tmp1
    tmp4 = x0
    tmp5 = tmp4 <= tmp3
    tmp6 = tl.full([1], 0.0, tl.float32)
    tmp7 = tl.full([1], -3.3895313892515355e+38, tl.float32)
    tmp8 = tl.where(tmp5, tmp6, tmp7)
    tl.store(out_ptr0 + (x0), tmp8, xmask)
''', device_str='cuda')


# Original path: /work/main/fusion_passes/kernels/decode_attention.py:58
_decode_attention_kernel_1 = async_compile.triton('_decode_attention_kernel', '''

import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties

@triton_heuristics.user_autotune(
    configs=[{'num_warps': 4, 'num_stages': 2}],
    inductor_meta={'grid_type': 'FixedGrid', 'fixed_grid': ['_grid_0', '_grid_1', '_grid_2'], 'extra_launcher_args': ['_grid_0', '_grid_1', '_grid_2'], 'kernel_name': '_decode_attention_kernel_1', 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False},
    triton_meta={'signature': {'Q': '*bf16', 'K': '*bf16', 'V': '*bf16', 'MASK': '*bf16', 'sq_b': 'i32', 'sq_h': 'i32', 'sq_s': 'i32', 'sk_b': 'i32', 'sk_h': 'i32', 'sk_s': 'i32', 'sv_b': 'i32', 'sv_h': 'i32', 'sv_s': 'i32', 'sm_b': 'i32', 'sm_h': 'i32', 'sm_q': 'i32', 'sm_k': 'constexpr', 'H_KV': 'i32', 'SQ': 'constexpr', 'SK': 'i32', 'D': 'i32', 'DV': 'i32', 'scale': 'fp64', 'M_PART': '*fp32', 'L_PART': '*fp32', 'ACC_PART': '*fp32', 'CHUNK': 'i32', 'GROUP': 'constexpr', 'HAS_MASK': 'constexpr', 'IS_CAUSAL': 'constexpr', 'BLOCK_M': 'constexpr', 'BLOCK_N': 'constexpr', 'BLOCK_D': 'constexpr', 'BLOCK_DV': 'constexpr', 'IEEE_F32': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {'sm_k': 1, 'SQ': 1, 'GROUP': 4, 'HAS_MASK': True, 'IS_CAUSAL': False, 'BLOCK_M': 16, 'BLOCK_N': 64, 'BLOCK_D': 64, 'BLOCK_DV': 64, 'IEEE_F32': False}, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (9,): [['tt.divisibility', 16]], (10,): [['tt.divisibility', 16]], (11,): [['tt.divisibility', 16]], (12,): [['tt.divisibility', 16]], (13,): [['tt.divisibility', 16]], (14,): [['tt.divisibility', 16]], (15,): [['tt.divisibility', 16]], (19,): [['tt.divisibility', 16]], (20,): [['tt.divisibility', 16]], (21,): [['tt.divisibility', 16]], (23,): [['tt.divisibility', 16]], (24,): [['tt.divisibility', 16]], (25,): [['tt.divisibility', 16]], (26,): [['tt.divisibility', 16]]}]},
    filename=__file__,
    custom_kernel=True,
)
@triton.jit
def _decode_attention_kernel(
    Q, K, V, MASK,
    sq_b, sq_h, sq_s,  # q strides (last dim contiguous)
    sk_b, sk_h, sk_s,
    sv_b, sv_h, sv_s,
    sm_b, sm_h, sm_q, sm_k,  # mask strides (0 where it broadcasts)
    H_KV, SQ, SK, D, DV, scale,
    M_PART, L_PART, ACC_PART,  # per-split partial max / sum / output (fp32), combined by _combine_kernel
    CHUNK,  # keys per split (a multiple of BLOCK_N)
    GROUP: tl.constexpr,  # H // Hkv query heads per KV head
    HAS_MASK: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # >= GROUP * SQ rows: (query head, query position) pairs of this KV head
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    IEEE_F32: tl.constexpr,  # fp32 q/k/v: full-precision dots, not Triton's TF32 default (kernels.ieee_fp32_dot)
):  # fmt: skip
    PRECISION: tl.constexpr = "ieee" if IEEE_F32 else None  # None: Triton's default
    scale = tl.full([], scale, tl.float32)  # Inductor passes a Python float as fp64: keep the softmax in fp32
    pid = tl.program_id(0)
    split = tl.program_id(1)
    n_splits = tl.num_programs(1)
    b = pid // H_KV
    kvh = pid % H_KV
    rows = tl.arange(0, BLOCK_M)
    row_ok = rows < GROUP * SQ
    head = kvh * GROUP + rows // SQ  # repeat_kv: query head h reads KV head h // GROUP
    qpos = rows % SQ
    d = tl.arange(0, BLOCK_D)
    dv = tl.arange(0, BLOCK_DV)
    q = tl.load(Q + b * sq_b + head[:, None] * sq_h + qpos[:, None] * sq_s + d[None, :],
                mask=row_ok[:, None] & (d[None, :] < D), other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    k_base = K + b * sk_b + kvh * sk_h
    v_base = V + b * sv_b + kvh * sv_h
    start = split * CHUNK
    for n0 in range(start, start + CHUNK, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        n_ok = n < SK
        k = tl.load(k_base + n[:, None] * sk_s + d[None, :], mask=n_ok[:, None] & (d[None, :] < D), other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale  # [BLOCK_M, BLOCK_N] fp32
        if HAS_MASK:
            mk = tl.load(MASK + b * sm_b + head[:, None] * sm_h + qpos[:, None] * sm_q + n[None, :] * sm_k,
                         mask=row_ok[:, None] & n_ok[None, :], other=0.0)
            s = s + mk.to(tl.float32)
        if IS_CAUSAL:
            s = tl.where(n[None, :] <= qpos[:, None], s, float("-inf"))
        s = tl.where(n_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # all masked so far: keep exp() finite
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + n[:, None] * sv_s + dv[None, :], mask=n_ok[:, None] & (dv[None, :] < DV), other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    part = (pid * n_splits + split) * BLOCK_M + rows  # [BLOCK_M] rows of this (kv head, split)
    tl.store(M_PART + part, m_i)
    tl.store(L_PART + part, l_i)
    tl.store(ACC_PART + part[:, None] * BLOCK_DV + dv[None, :], acc)
''', device_str='cuda')


# Original path: /work/main/fusion_passes/kernels/decode_attention.py:123
_combine_kernel_2 = async_compile.triton('_combine_kernel', '''

import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties

@triton_heuristics.user_autotune(
    configs=[{'num_warps': 1, 'num_stages': 3}],
    inductor_meta={'grid_type': 'FixedGrid', 'fixed_grid': ['_grid_0', '_grid_1', '_grid_2'], 'extra_launcher_args': ['_grid_0', '_grid_1', '_grid_2'], 'kernel_name': '_combine_kernel_2', 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False},
    triton_meta={'signature': {'M_IN': '*fp32', 'L_IN': '*fp32', 'ACC_IN': '*fp32', 'OUT': '*bf16', 'so_b': 'i32', 'so_h': 'i32', 'so_s': 'i32', 'H_KV': 'i32', 'SQ': 'constexpr', 'DV': 'i32', 'N_SPLITS': 'i32', 'GROUP': 'constexpr', 'BLOCK_M': 'constexpr', 'BLOCK_S': 'constexpr', 'BLOCK_DV': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {'SQ': 1, 'GROUP': 4, 'BLOCK_M': 16, 'BLOCK_S': 32, 'BLOCK_DV': 64}, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (9,): [['tt.divisibility', 16]]}]},
    filename=__file__,
    custom_kernel=True,
)
@triton.jit
def _combine_kernel(
    M_IN, L_IN, ACC_IN, OUT,
    so_b, so_h, so_s,
    H_KV, SQ, DV, N_SPLITS,
    GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_DV: tl.constexpr,
):  # fmt: skip
    """One program per (batch x KV head, query row): rescale the splits' partial results (the attention
    kernel's M_PART / L_PART / ACC_PART) and sum them."""
    pid = tl.program_id(0)
    row = tl.program_id(1)
    b = pid // H_KV
    head = (pid % H_KV) * GROUP + row // SQ
    qpos = row % SQ
    sp = tl.arange(0, BLOCK_S)
    sp_ok = sp < N_SPLITS
    dv = tl.arange(0, BLOCK_DV)
    part = (pid * N_SPLITS + sp) * BLOCK_M + row
    m = tl.load(M_IN + part, mask=sp_ok, other=float("-inf"))
    l = tl.load(L_IN + part, mask=sp_ok, other=0.0)
    m_max = tl.max(m, axis=0)
    w = tl.exp(m - tl.where(m_max == float("-inf"), 0.0, m_max))
    acc = tl.load(ACC_IN + part[:, None] * BLOCK_DV + dv[None, :], mask=sp_ok[:, None], other=0.0)
    out = tl.sum(acc * w[:, None], axis=0) / tl.sum(l * w, axis=0)
    tl.store(OUT + b * so_b + head * so_h + qpos * so_s + dv, out.to(OUT.dtype.element_ty), mask=dv < DV)
''', device_str='cuda')


# Original path: /work/main/fusion_passes/kernels/gemv.py:117
_gemv_kernel_3 = async_compile.triton('_gemv_kernel', '''

import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties

@triton_heuristics.user_autotune(
    configs=[{'BLOCK_N': 2, 'BLOCK_K': 1024, 'PREFETCH': False, 'num_warps': 4, 'num_stages': 2}],
    inductor_meta={'grid_type': 'FixedGrid', 'fixed_grid': ['_grid_0', '_grid_1', '_grid_2'], 'extra_launcher_args': ['_grid_0', '_grid_1', '_grid_2'], 'kernel_name': '_gemv_kernel_3', 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False},
    triton_meta={'signature': {'X': '*bf16', 'NW': 'constexpr', 'W0': '*bf16', 'W1': '*bf16', 'W2': '*bf16', 'R': '*bf16', 'COS': 'constexpr', 'SIN': 'constexpr', 'Y': '*bf16', 'C0': 'constexpr', 'C1': 'constexpr', 'C2': 'constexpr', 'IDX': 'constexpr', 'M': 'constexpr', 'K': 'i32', 'N0': 'i32', 'N1': 'i32', 'N2': 'i32', 'stride_x': 'i32', 'stride_r': 'i32', 'stride_y': 'i32', 'stride_cs': 'i32', 'eps': 'fp64', 'norm_offset': 'fp64', 'rope_dim': 'i32', 'rope_weights': 'i32', 'seq_len': 'constexpr', 'cache_len': 'i32', 'head_dim': 'constexpr', 'sc_b': 'i32', 'sc_h': 'i32', 'sc_l': 'i32', 'sc_d': 'i32', 'CONCAT_W': 'constexpr', 'HAS_NORM': 'constexpr', 'NORM_CAST': 'constexpr', 'NORM_OFFSET': 'constexpr', 'SILU_MUL': 'constexpr', 'HAS_RES': 'constexpr', 'ROPE': 'constexpr', 'CACHE_MASK': 'constexpr', 'BLOCK_M': 'constexpr', 'BLOCK_N': 'constexpr', 'BLOCK_K': 'constexpr', 'PREFETCH': 'constexpr', 'IEEE_F32': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {'NW': None, 'COS': None, 'SIN': None, 'C0': None, 'C1': None, 'C2': None, 'IDX': None, 'M': 1, 'seq_len': 1, 'head_dim': 1, 'CONCAT_W': 1, 'HAS_NORM': False, 'NORM_CAST': False, 'NORM_OFFSET': False, 'SILU_MUL': False, 'HAS_RES': True, 'ROPE': False, 'CACHE_MASK': 0, 'BLOCK_M': 1, 'IEEE_F32': False}, 'configs': [{(0,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (14,): [['tt.divisibility', 16]], (15,): [['tt.divisibility', 16]], (16,): [['tt.divisibility', 16]], (17,): [['tt.divisibility', 16]], (18,): [['tt.divisibility', 16]], (19,): [['tt.divisibility', 16]], (20,): [['tt.divisibility', 16]], (21,): [['tt.divisibility', 16]], (24,): [['tt.divisibility', 16]], (25,): [['tt.divisibility', 16]], (27,): [['tt.divisibility', 16]], (29,): [['tt.divisibility', 16]], (30,): [['tt.divisibility', 16]], (31,): [['tt.divisibility', 16]], (32,): [['tt.divisibility', 16]]}]},
    filename=__file__,
    custom_kernel=True,
)
@triton.jit
def _gemv_kernel(
    X,  # [M, K] input, dtype T, row stride stride_x
    NW,  # [K] norm weight (None unless HAS_NORM)
    W0,  # [N0, K] contiguous
    W1,  # [N1, K] (second concatenated weight, or the up projection when SILU_MUL; else W0)
    W2,  # [N2, K] (third concatenated weight; else W0)
    R,  # [M, N0] residual (None unless HAS_RES)
    COS,  # [M, rope_dim] (None unless ROPE)
    SIN,  # [M, rope_dim] (None unless ROPE)
    Y,  # [M, N_out] output, row stride stride_y
    C0,  # [B, H_0, L, HD] KV cache output 0's heads are also written to (None unless CACHE_MASK & 1)
    C1,  # ... output 1's (None unless CACHE_MASK & 2)
    C2,  # ... output 2's (None unless CACHE_MASK & 4)
    IDX,  # [S] cache positions of a batch's S rows (None unless CACHE_MASK)
    M,
    K,
    N0,
    N1,
    N2,
    stride_x,
    stride_r,
    stride_y,
    stride_cs,  # row stride of COS and SIN
    eps,
    norm_offset,
    rope_dim,
    rope_weights,  # the first rope_weights weights' outputs are rotated
    seq_len,  # S: output row m is token m % S of sequence m // S (cache writes only)
    cache_len,  # L
    head_dim,  # HD: cache head h holds output columns h * HD .. (h + 1) * HD
    sc_b,  # the caches' strides (every cache has the same layout)
    sc_h,
    sc_l,
    sc_d,
    CONCAT_W: tl.constexpr,  # 1-3 weights whose outputs are concatenated (1 with SILU_MUL / HAS_RES)
    HAS_NORM: tl.constexpr,
    NORM_CAST: tl.constexpr,
    NORM_OFFSET: tl.constexpr,
    SILU_MUL: tl.constexpr,
    HAS_RES: tl.constexpr,
    ROPE: tl.constexpr,  # programs own column pairs (j, j + rope_dim/2) of every weight
    CACHE_MASK: tl.constexpr,  # bit i: output i's heads are written into C_i at IDX (a KV-cache update)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PREFETCH: tl.constexpr,  # M = 1 only: load the next K tile while reducing this one
    IEEE_F32: tl.constexpr,  # fp32: the 16-row tile's dots in full precision, not TF32 (kernels.ieee_fp32_dot)
):
    T = X.dtype.element_ty
    PRECISION: tl.constexpr = "ieee" if IEEE_F32 else None  # None: Triton's default (TF32 for fp32)
    pid = tl.program_id(0)
    # which weight this program's columns come from (the grid covers cdiv(N0)+cdiv(N1)+cdiv(N2) blocks)
    PAIR: tl.constexpr = 2 if ROPE else 1  # output columns per program column
    w_ptr = W0
    blk = pid
    n_lim = N0 + pid * 0
    col0 = pid * 0
    w_idx = pid * 0
    if CONCAT_W >= 2:
        nb0 = tl.cdiv(N0 // PAIR, BLOCK_N)
        if pid >= nb0:
            w_ptr = W1
            blk = pid - nb0
            n_lim = N1 + pid * 0
            col0 = N0 + pid * 0
            w_idx = 1 + pid * 0
        if CONCAT_W == 3:
            nb01 = nb0 + tl.cdiv(N1 // PAIR, BLOCK_N)
            if pid >= nb01:
                w_ptr = W2
                blk = pid - nb01
                n_lim = N2 + pid * 0
                col0 = N0 + N1 + pid * 0
                w_idx = 2 + pid * 0

    rm = tl.arange(0, BLOCK_M)
    m_ok = rm < M
    rn = blk * BLOCK_N + tl.arange(0, BLOCK_N)
    if ROPE:  # program column t -> the pair (j, j + h) of head t // h, j = t % h
        half = rope_dim // 2
        n_ok = rn < n_lim // 2
        rj = rn % half
        rn = (rn // half) * rope_dim + rj
        w_rows2 = w_ptr + (rn + half).to(tl.int64)[:, None] * K
    else:
        n_ok = rn < n_lim
    w_rows = w_ptr + rn.to(tl.int64)[:, None] * K
    if SILU_MUL:
        w_rows2 = W1 + rn.to(tl.int64)[:, None] * K
    elif not ROPE:
        w_rows2 = w_rows  # never read: _load_tile loads a second weight only when TWO

    TWO: tl.constexpr = SILU_MUL or ROPE  # a second accumulator: the up projection, or the pair's other half
    if PREFETCH:  # the first weight tile is requested before the norm prologue, so HBM starts streaming at once
        x, w, u = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, 0, K, stride_x, TWO, BLOCK_K)
    if HAS_NORM:  # per-row 1/rms over the whole row (the row is small and L2-resident)
        ss = tl.zeros([BLOCK_M], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            xk = tl.load(X + rm[:, None] * stride_x + rk[None, :], mask=m_ok[:, None] & (rk[None, :] < K), other=0.0)
            xk = xk.to(tl.float32)
            ss += tl.sum(xk * xk, axis=1)
        rstd = tl.rsqrt(ss / K + eps)

    if BLOCK_M == 1:
        acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        if TWO:
            acc_u = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if TWO:
            acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)

    for k0 in range(0, K, BLOCK_K):
        if PREFETCH:
            x_nxt, w_nxt, u_nxt = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0 + BLOCK_K, K, stride_x, TWO,
                                             BLOCK_K)
        else:
            x, w, u = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0, K, stride_x, TWO, BLOCK_K)
        rk = k0 + tl.arange(0, BLOCK_K)
        k_ok = rk < K
        if HAS_NORM:
            xf = x.to(tl.float32) * rstd[:, None]
            if NORM_CAST:
                xf = xf.to(T).to(tl.float32)
            nw = tl.load(NW + rk, mask=k_ok, other=0.0).to(tl.float32)
            if NORM_OFFSET:
                nw = nw + norm_offset
            x = (xf * nw[None, :]).to(T)
        if BLOCK_M == 1:
            xr = x.to(tl.float32)  # [1, BLOCK_K] broadcasts over the BLOCK_N weight rows
            acc += w.to(tl.float32) * xr
            if TWO:
                acc_u += u.to(tl.float32) * xr
        else:
            acc = tl.dot(x, tl.trans(w), acc, input_precision=PRECISION)
            if TWO:
                acc_u = tl.dot(x, tl.trans(u), acc_u, input_precision=PRECISION)
        if PREFETCH:
            x, w, u = x_nxt, w_nxt, u_nxt

    if BLOCK_M == 1:
        y = tl.sum(acc, axis=1)[None, :]
        if TWO:
            y_u = tl.sum(acc_u, axis=1)[None, :]
    else:
        y = acc
        if TWO:
            y_u = acc_u
    y = y.to(T)  # the GEMM's output dtype, as eager rounds it
    out_mask = m_ok[:, None] & n_ok[None, :]
    if SILU_MUL:
        g = y.to(tl.float32)
        s = (g / (1.0 + tl.exp(-g))).to(T)
        y = (s.to(tl.float32) * y_u.to(T).to(tl.float32)).to(T)
    if HAS_RES:
        r = tl.load(R + rm[:, None] * stride_r + rn[None, :], mask=out_mask, other=0.0)
        y = (y.to(tl.float32) + r.to(tl.float32)).to(T)
    if ROPE:
        y2 = y_u.to(T)  # the pair's other half: columns j + h
        cs = rm[:, None] * stride_cs + rj[None, :]
        c1 = tl.load(COS + cs, mask=out_mask, other=0.0).to(tl.float32)
        s1 = tl.load(SIN + cs, mask=out_mask, other=0.0).to(tl.float32)
        c2 = tl.load(COS + cs + half, mask=out_mask, other=0.0).to(tl.float32)
        s2 = tl.load(SIN + cs + half, mask=out_mask, other=0.0).to(tl.float32)
        a, b = y.to(tl.float32), y2.to(tl.float32)
        ra = ((a * c1).to(T).to(tl.float32) + (-b * s1).to(T).to(tl.float32)).to(T)
        rb = ((b * c2).to(T).to(tl.float32) + (a * s2).to(T).to(tl.float32)).to(T)
        rotate = w_idx < rope_weights
        y = tl.where(rotate, ra, y)
        y2 = tl.where(rotate, rb, y2)
        tl.store(Y + rm[:, None] * stride_y + (col0 + rn + half)[None, :], y2, mask=out_mask)
    if CACHE_MASK != 0:
        _store_cache_rows(C0, C1, C2, IDX, y, rn, w_idx, rm, out_mask, seq_len, cache_len, head_dim, sc_b, sc_h,
                          sc_l, sc_d, CACHE_MASK)
        if ROPE:
            _store_cache_rows(C0, C1, C2, IDX, y2, rn + half, w_idx, rm, out_mask, seq_len, cache_len, head_dim,
                              sc_b, sc_h, sc_l, sc_d, CACHE_MASK)
    tl.store(Y + rm[:, None] * stride_y + (col0 + rn)[None, :], y, mask=out_mask)

@triton.jit
def _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0, K, stride_x, TWO: tl.constexpr, BLOCK_K: tl.constexpr):
    """Columns k0 .. k0 + BLOCK_K of x [BLOCK_M, BLOCK_K] and of the program's weight rows [BLOCK_N, BLOCK_K]
    (u: the second weight's rows when TWO, else w again); zeros past K."""
    rk = k0 + tl.arange(0, BLOCK_K)
    k_ok = rk < K
    x = tl.load(X + rm[:, None] * stride_x + rk[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
    w_mask = n_ok[:, None] & k_ok[None, :]
    w = tl.load(w_rows + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
    u = w
    if TWO:
        u = tl.load(w_rows2 + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
    return x, w, u

@triton.jit
def _store_cache_rows(C0, C1, C2, IDX, y, cols, w_idx, rm, mask, seq_len, cache_len, head_dim, sc_b, sc_h, sc_l,
                      sc_d, CACHE_MASK: tl.constexpr):
    """y [BLOCK_M, BLOCK_N] (rows rm, columns ``cols`` of output w_idx) into C_{w_idx}[b, col // HD, IDX[s],
    col % HD] for row m = b * S + s, as ``C.index_put_([None, None, IDX], heads)`` stores them: a negative
    position counts from the end; one past either end is skipped (eager raises there)."""
    pos = tl.load(IDX + rm % seq_len).to(tl.int64)  # in bounds for the masked rows too
    pos = tl.where(pos < 0, pos + cache_len, pos)
    ok = mask & ((pos >= 0) & (pos < cache_len))[:, None]
    off = ((rm // seq_len).to(tl.int64) * sc_b + pos * sc_l)[:, None] + \
        ((cols // head_dim).to(tl.int64) * sc_h + (cols % head_dim).to(tl.int64) * sc_d)[None, :]
    which = (cols * 0 + w_idx)[None, :]  # a vector, not the scalar: Triton's interpreter masks with no scalar
    if CACHE_MASK & 1:
        tl.store(C0 + off, y, mask=ok & (which == 0))
    if CACHE_MASK & 2:
        tl.store(C1 + off, y, mask=ok & (which == 1))
    if CACHE_MASK & 4:
        tl.store(C2 + off, y, mask=ok & (which == 2))
''', device_str='cuda')


# Original path: /work/main/fusion_passes/kernels/gemv.py:117
_gemv_kernel_4 = async_compile.triton('_gemv_kernel', '''

import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties

@triton_heuristics.user_autotune(
    configs=[{'BLOCK_N': 2, 'BLOCK_K': 1024, 'PREFETCH': False, 'num_warps': 4, 'num_stages': 2}],
    inductor_meta={'grid_type': 'FixedGrid', 'fixed_grid': ['_grid_0', '_grid_1', '_grid_2'], 'extra_launcher_args': ['_grid_0', '_grid_1', '_grid_2'], 'kernel_name': '_gemv_kernel_4', 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False},
    triton_meta={'signature': {'X': '*bf16', 'NW': '*bf16', 'W0': '*bf16', 'W1': '*bf16', 'W2': '*bf16', 'R': 'constexpr', 'COS': 'constexpr', 'SIN': 'constexpr', 'Y': '*bf16', 'C0': 'constexpr', 'C1': 'constexpr', 'C2': 'constexpr', 'IDX': 'constexpr', 'M': 'constexpr', 'K': 'i32', 'N0': 'i32', 'N1': 'i32', 'N2': 'i32', 'stride_x': 'i32', 'stride_r': 'i32', 'stride_y': 'i32', 'stride_cs': 'i32', 'eps': 'fp64', 'norm_offset': 'fp64', 'rope_dim': 'i32', 'rope_weights': 'i32', 'seq_len': 'constexpr', 'cache_len': 'i32', 'head_dim': 'constexpr', 'sc_b': 'i32', 'sc_h': 'i32', 'sc_l': 'i32', 'sc_d': 'i32', 'CONCAT_W': 'constexpr', 'HAS_NORM': 'constexpr', 'NORM_CAST': 'constexpr', 'NORM_OFFSET': 'constexpr', 'SILU_MUL': 'constexpr', 'HAS_RES': 'constexpr', 'ROPE': 'constexpr', 'CACHE_MASK': 'constexpr', 'BLOCK_M': 'constexpr', 'BLOCK_N': 'constexpr', 'BLOCK_K': 'constexpr', 'PREFETCH': 'constexpr', 'IEEE_F32': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {'R': None, 'COS': None, 'SIN': None, 'C0': None, 'C1': None, 'C2': None, 'IDX': None, 'M': 1, 'seq_len': 1, 'head_dim': 1, 'CONCAT_W': 1, 'HAS_NORM': True, 'NORM_CAST': True, 'NORM_OFFSET': False, 'SILU_MUL': True, 'HAS_RES': False, 'ROPE': False, 'CACHE_MASK': 0, 'BLOCK_M': 1, 'IEEE_F32': False}, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (14,): [['tt.divisibility', 16]], (15,): [['tt.divisibility', 16]], (16,): [['tt.divisibility', 16]], (17,): [['tt.divisibility', 16]], (18,): [['tt.divisibility', 16]], (19,): [['tt.divisibility', 16]], (20,): [['tt.divisibility', 16]], (21,): [['tt.divisibility', 16]], (24,): [['tt.divisibility', 16]], (25,): [['tt.divisibility', 16]], (27,): [['tt.divisibility', 16]], (29,): [['tt.divisibility', 16]], (30,): [['tt.divisibility', 16]], (31,): [['tt.divisibility', 16]], (32,): [['tt.divisibility', 16]]}]},
    filename=__file__,
    custom_kernel=True,
)
@triton.jit
def _gemv_kernel(
    X,  # [M, K] input, dtype T, row stride stride_x
    NW,  # [K] norm weight (None unless HAS_NORM)
    W0,  # [N0, K] contiguous
    W1,  # [N1, K] (second concatenated weight, or the up projection when SILU_MUL; else W0)
    W2,  # [N2, K] (third concatenated weight; else W0)
    R,  # [M, N0] residual (None unless HAS_RES)
    COS,  # [M, rope_dim] (None unless ROPE)
    SIN,  # [M, rope_dim] (None unless ROPE)
    Y,  # [M, N_out] output, row stride stride_y
    C0,  # [B, H_0, L, HD] KV cache output 0's heads are also written to (None unless CACHE_MASK & 1)
    C1,  # ... output 1's (None unless CACHE_MASK & 2)
    C2,  # ... output 2's (None unless CACHE_MASK & 4)
    IDX,  # [S] cache positions of a batch's S rows (None unless CACHE_MASK)
    M,
    K,
    N0,
    N1,
    N2,
    stride_x,
    stride_r,
    stride_y,
    stride_cs,  # row stride of COS and SIN
    eps,
    norm_offset,
    rope_dim,
    rope_weights,  # the first rope_weights weights' outputs are rotated
    seq_len,  # S: output row m is token m % S of sequence m // S (cache writes only)
    cache_len,  # L
    head_dim,  # HD: cache head h holds output columns h * HD .. (h + 1) * HD
    sc_b,  # the caches' strides (every cache has the same layout)
    sc_h,
    sc_l,
    sc_d,
    CONCAT_W: tl.constexpr,  # 1-3 weights whose outputs are concatenated (1 with SILU_MUL / HAS_RES)
    HAS_NORM: tl.constexpr,
    NORM_CAST: tl.constexpr,
    NORM_OFFSET: tl.constexpr,
    SILU_MUL: tl.constexpr,
    HAS_RES: tl.constexpr,
    ROPE: tl.constexpr,  # programs own column pairs (j, j + rope_dim/2) of every weight
    CACHE_MASK: tl.constexpr,  # bit i: output i's heads are written into C_i at IDX (a KV-cache update)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PREFETCH: tl.constexpr,  # M = 1 only: load the next K tile while reducing this one
    IEEE_F32: tl.constexpr,  # fp32: the 16-row tile's dots in full precision, not TF32 (kernels.ieee_fp32_dot)
):
    T = X.dtype.element_ty
    PRECISION: tl.constexpr = "ieee" if IEEE_F32 else None  # None: Triton's default (TF32 for fp32)
    pid = tl.program_id(0)
    # which weight this program's columns come from (the grid covers cdiv(N0)+cdiv(N1)+cdiv(N2) blocks)
    PAIR: tl.constexpr = 2 if ROPE else 1  # output columns per program column
    w_ptr = W0
    blk = pid
    n_lim = N0 + pid * 0
    col0 = pid * 0
    w_idx = pid * 0
    if CONCAT_W >= 2:
        nb0 = tl.cdiv(N0 // PAIR, BLOCK_N)
        if pid >= nb0:
            w_ptr = W1
            blk = pid - nb0
            n_lim = N1 + pid * 0
            col0 = N0 + pid * 0
            w_idx = 1 + pid * 0
        if CONCAT_W == 3:
            nb01 = nb0 + tl.cdiv(N1 // PAIR, BLOCK_N)
            if pid >= nb01:
                w_ptr = W2
                blk = pid - nb01
                n_lim = N2 + pid * 0
                col0 = N0 + N1 + pid * 0
                w_idx = 2 + pid * 0

    rm = tl.arange(0, BLOCK_M)
    m_ok = rm < M
    rn = blk * BLOCK_N + tl.arange(0, BLOCK_N)
    if ROPE:  # program column t -> the pair (j, j + h) of head t // h, j = t % h
        half = rope_dim // 2
        n_ok = rn < n_lim // 2
        rj = rn % half
        rn = (rn // half) * rope_dim + rj
        w_rows2 = w_ptr + (rn + half).to(tl.int64)[:, None] * K
    else:
        n_ok = rn < n_lim
    w_rows = w_ptr + rn.to(tl.int64)[:, None] * K
    if SILU_MUL:
        w_rows2 = W1 + rn.to(tl.int64)[:, None] * K
    elif not ROPE:
        w_rows2 = w_rows  # never read: _load_tile loads a second weight only when TWO

    TWO: tl.constexpr = SILU_MUL or ROPE  # a second accumulator: the up projection, or the pair's other half
    if PREFETCH:  # the first weight tile is requested before the norm prologue, so HBM starts streaming at once
        x, w, u = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, 0, K, stride_x, TWO, BLOCK_K)
    if HAS_NORM:  # per-row 1/rms over the whole row (the row is small and L2-resident)
        ss = tl.zeros([BLOCK_M], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            xk = tl.load(X + rm[:, None] * stride_x + rk[None, :], mask=m_ok[:, None] & (rk[None, :] < K), other=0.0)
            xk = xk.to(tl.float32)
            ss += tl.sum(xk * xk, axis=1)
        rstd = tl.rsqrt(ss / K + eps)

    if BLOCK_M == 1:
        acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        if TWO:
            acc_u = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if TWO:
            acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)

    for k0 in range(0, K, BLOCK_K):
        if PREFETCH:
            x_nxt, w_nxt, u_nxt = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0 + BLOCK_K, K, stride_x, TWO,
                                             BLOCK_K)
        else:
            x, w, u = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0, K, stride_x, TWO, BLOCK_K)
        rk = k0 + tl.arange(0, BLOCK_K)
        k_ok = rk < K
        if HAS_NORM:
            xf = x.to(tl.float32) * rstd[:, None]
            if NORM_CAST:
                xf = xf.to(T).to(tl.float32)
            nw = tl.load(NW + rk, mask=k_ok, other=0.0).to(tl.float32)
            if NORM_OFFSET:
                nw = nw + norm_offset
            x = (xf * nw[None, :]).to(T)
        if BLOCK_M == 1:
            xr = x.to(tl.float32)  # [1, BLOCK_K] broadcasts over the BLOCK_N weight rows
            acc += w.to(tl.float32) * xr
            if TWO:
                acc_u += u.to(tl.float32) * xr
        else:
            acc = tl.dot(x, tl.trans(w), acc, input_precision=PRECISION)
            if TWO:
                acc_u = tl.dot(x, tl.trans(u), acc_u, input_precision=PRECISION)
        if PREFETCH:
            x, w, u = x_nxt, w_nxt, u_nxt

    if BLOCK_M == 1:
        y = tl.sum(acc, axis=1)[None, :]
        if TWO:
            y_u = tl.sum(acc_u, axis=1)[None, :]
    else:
        y = acc
        if TWO:
            y_u = acc_u
    y = y.to(T)  # the GEMM's output dtype, as eager rounds it
    out_mask = m_ok[:, None] & n_ok[None, :]
    if SILU_MUL:
        g = y.to(tl.float32)
        s = (g / (1.0 + tl.exp(-g))).to(T)
        y = (s.to(tl.float32) * y_u.to(T).to(tl.float32)).to(T)
    if HAS_RES:
        r = tl.load(R + rm[:, None] * stride_r + rn[None, :], mask=out_mask, other=0.0)
        y = (y.to(tl.float32) + r.to(tl.float32)).to(T)
    if ROPE:
        y2 = y_u.to(T)  # the pair's other half: columns j + h
        cs = rm[:, None] * stride_cs + rj[None, :]
        c1 = tl.load(COS + cs, mask=out_mask, other=0.0).to(tl.float32)
        s1 = tl.load(SIN + cs, mask=out_mask, other=0.0).to(tl.float32)
        c2 = tl.load(COS + cs + half, mask=out_mask, other=0.0).to(tl.float32)
        s2 = tl.load(SIN + cs + half, mask=out_mask, other=0.0).to(tl.float32)
        a, b = y.to(tl.float32), y2.to(tl.float32)
        ra = ((a * c1).to(T).to(tl.float32) + (-b * s1).to(T).to(tl.float32)).to(T)
        rb = ((b * c2).to(T).to(tl.float32) + (a * s2).to(T).to(tl.float32)).to(T)
        rotate = w_idx < rope_weights
        y = tl.where(rotate, ra, y)
        y2 = tl.where(rotate, rb, y2)
        tl.store(Y + rm[:, None] * stride_y + (col0 + rn + half)[None, :], y2, mask=out_mask)
    if CACHE_MASK != 0:
        _store_cache_rows(C0, C1, C2, IDX, y, rn, w_idx, rm, out_mask, seq_len, cache_len, head_dim, sc_b, sc_h,
                          sc_l, sc_d, CACHE_MASK)
        if ROPE:
            _store_cache_rows(C0, C1, C2, IDX, y2, rn + half, w_idx, rm, out_mask, seq_len, cache_len, head_dim,
                              sc_b, sc_h, sc_l, sc_d, CACHE_MASK)
    tl.store(Y + rm[:, None] * stride_y + (col0 + rn)[None, :], y, mask=out_mask)

@triton.jit
def _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0, K, stride_x, TWO: tl.constexpr, BLOCK_K: tl.constexpr):
    """Columns k0 .. k0 + BLOCK_K of x [BLOCK_M, BLOCK_K] and of the program's weight rows [BLOCK_N, BLOCK_K]
    (u: the second weight's rows when TWO, else w again); zeros past K."""
    rk = k0 + tl.arange(0, BLOCK_K)
    k_ok = rk < K
    x = tl.load(X + rm[:, None] * stride_x + rk[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
    w_mask = n_ok[:, None] & k_ok[None, :]
    w = tl.load(w_rows + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
    u = w
    if TWO:
        u = tl.load(w_rows2 + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
    return x, w, u

@triton.jit
def _store_cache_rows(C0, C1, C2, IDX, y, cols, w_idx, rm, mask, seq_len, cache_len, head_dim, sc_b, sc_h, sc_l,
                      sc_d, CACHE_MASK: tl.constexpr):
    """y [BLOCK_M, BLOCK_N] (rows rm, columns ``cols`` of output w_idx) into C_{w_idx}[b, col // HD, IDX[s],
    col % HD] for row m = b * S + s, as ``C.index_put_([None, None, IDX], heads)`` stores them: a negative
    position counts from the end; one past either end is skipped (eager raises there)."""
    pos = tl.load(IDX + rm % seq_len).to(tl.int64)  # in bounds for the masked rows too
    pos = tl.where(pos < 0, pos + cache_len, pos)
    ok = mask & ((pos >= 0) & (pos < cache_len))[:, None]
    off = ((rm // seq_len).to(tl.int64) * sc_b + pos * sc_l)[:, None] + \
        ((cols // head_dim).to(tl.int64) * sc_h + (cols % head_dim).to(tl.int64) * sc_d)[None, :]
    which = (cols * 0 + w_idx)[None, :]  # a vector, not the scalar: Triton's interpreter masks with no scalar
    if CACHE_MASK & 1:
        tl.store(C0 + off, y, mask=ok & (which == 0))
    if CACHE_MASK & 2:
        tl.store(C1 + off, y, mask=ok & (which == 1))
    if CACHE_MASK & 4:
        tl.store(C2 + off, y, mask=ok & (which == 2))
''', device_str='cuda')


# Original path: /work/main/fusion_passes/kernels/gemv.py:117
_gemv_kernel_5 = async_compile.triton('_gemv_kernel', '''

import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties

@triton_heuristics.user_autotune(
    configs=[{'BLOCK_N': 4, 'BLOCK_K': 1024, 'PREFETCH': True, 'num_warps': 8, 'num_stages': 2}],
    inductor_meta={'grid_type': 'FixedGrid', 'fixed_grid': ['_grid_0', '_grid_1', '_grid_2'], 'extra_launcher_args': ['_grid_0', '_grid_1', '_grid_2'], 'kernel_name': '_gemv_kernel_5', 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False},
    triton_meta={'signature': {'X': '*bf16', 'NW': 'constexpr', 'W0': '*bf16', 'W1': '*bf16', 'W2': '*bf16', 'R': '*bf16', 'COS': 'constexpr', 'SIN': 'constexpr', 'Y': '*bf16', 'C0': 'constexpr', 'C1': 'constexpr', 'C2': 'constexpr', 'IDX': 'constexpr', 'M': 'constexpr', 'K': 'i32', 'N0': 'i32', 'N1': 'i32', 'N2': 'i32', 'stride_x': 'i32', 'stride_r': 'i32', 'stride_y': 'i32', 'stride_cs': 'i32', 'eps': 'fp64', 'norm_offset': 'fp64', 'rope_dim': 'i32', 'rope_weights': 'i32', 'seq_len': 'constexpr', 'cache_len': 'i32', 'head_dim': 'constexpr', 'sc_b': 'i32', 'sc_h': 'i32', 'sc_l': 'i32', 'sc_d': 'i32', 'CONCAT_W': 'constexpr', 'HAS_NORM': 'constexpr', 'NORM_CAST': 'constexpr', 'NORM_OFFSET': 'constexpr', 'SILU_MUL': 'constexpr', 'HAS_RES': 'constexpr', 'ROPE': 'constexpr', 'CACHE_MASK': 'constexpr', 'BLOCK_M': 'constexpr', 'BLOCK_N': 'constexpr', 'BLOCK_K': 'constexpr', 'PREFETCH': 'constexpr', 'IEEE_F32': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {'NW': None, 'COS': None, 'SIN': None, 'C0': None, 'C1': None, 'C2': None, 'IDX': None, 'M': 1, 'seq_len': 1, 'head_dim': 1, 'CONCAT_W': 1, 'HAS_NORM': False, 'NORM_CAST': False, 'NORM_OFFSET': False, 'SILU_MUL': False, 'HAS_RES': True, 'ROPE': False, 'CACHE_MASK': 0, 'BLOCK_M': 1, 'IEEE_F32': False}, 'configs': [{(0,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (14,): [['tt.divisibility', 16]], (15,): [['tt.divisibility', 16]], (16,): [['tt.divisibility', 16]], (17,): [['tt.divisibility', 16]], (18,): [['tt.divisibility', 16]], (19,): [['tt.divisibility', 16]], (20,): [['tt.divisibility', 16]], (21,): [['tt.divisibility', 16]], (24,): [['tt.divisibility', 16]], (25,): [['tt.divisibility', 16]], (27,): [['tt.divisibility', 16]], (29,): [['tt.divisibility', 16]], (30,): [['tt.divisibility', 16]], (31,): [['tt.divisibility', 16]], (32,): [['tt.divisibility', 16]]}]},
    filename=__file__,
    custom_kernel=True,
)
@triton.jit
def _gemv_kernel(
    X,  # [M, K] input, dtype T, row stride stride_x
    NW,  # [K] norm weight (None unless HAS_NORM)
    W0,  # [N0, K] contiguous
    W1,  # [N1, K] (second concatenated weight, or the up projection when SILU_MUL; else W0)
    W2,  # [N2, K] (third concatenated weight; else W0)
    R,  # [M, N0] residual (None unless HAS_RES)
    COS,  # [M, rope_dim] (None unless ROPE)
    SIN,  # [M, rope_dim] (None unless ROPE)
    Y,  # [M, N_out] output, row stride stride_y
    C0,  # [B, H_0, L, HD] KV cache output 0's heads are also written to (None unless CACHE_MASK & 1)
    C1,  # ... output 1's (None unless CACHE_MASK & 2)
    C2,  # ... output 2's (None unless CACHE_MASK & 4)
    IDX,  # [S] cache positions of a batch's S rows (None unless CACHE_MASK)
    M,
    K,
    N0,
    N1,
    N2,
    stride_x,
    stride_r,
    stride_y,
    stride_cs,  # row stride of COS and SIN
    eps,
    norm_offset,
    rope_dim,
    rope_weights,  # the first rope_weights weights' outputs are rotated
    seq_len,  # S: output row m is token m % S of sequence m // S (cache writes only)
    cache_len,  # L
    head_dim,  # HD: cache head h holds output columns h * HD .. (h + 1) * HD
    sc_b,  # the caches' strides (every cache has the same layout)
    sc_h,
    sc_l,
    sc_d,
    CONCAT_W: tl.constexpr,  # 1-3 weights whose outputs are concatenated (1 with SILU_MUL / HAS_RES)
    HAS_NORM: tl.constexpr,
    NORM_CAST: tl.constexpr,
    NORM_OFFSET: tl.constexpr,
    SILU_MUL: tl.constexpr,
    HAS_RES: tl.constexpr,
    ROPE: tl.constexpr,  # programs own column pairs (j, j + rope_dim/2) of every weight
    CACHE_MASK: tl.constexpr,  # bit i: output i's heads are written into C_i at IDX (a KV-cache update)
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PREFETCH: tl.constexpr,  # M = 1 only: load the next K tile while reducing this one
    IEEE_F32: tl.constexpr,  # fp32: the 16-row tile's dots in full precision, not TF32 (kernels.ieee_fp32_dot)
):
    T = X.dtype.element_ty
    PRECISION: tl.constexpr = "ieee" if IEEE_F32 else None  # None: Triton's default (TF32 for fp32)
    pid = tl.program_id(0)
    # which weight this program's columns come from (the grid covers cdiv(N0)+cdiv(N1)+cdiv(N2) blocks)
    PAIR: tl.constexpr = 2 if ROPE else 1  # output columns per program column
    w_ptr = W0
    blk = pid
    n_lim = N0 + pid * 0
    col0 = pid * 0
    w_idx = pid * 0
    if CONCAT_W >= 2:
        nb0 = tl.cdiv(N0 // PAIR, BLOCK_N)
        if pid >= nb0:
            w_ptr = W1
            blk = pid - nb0
            n_lim = N1 + pid * 0
            col0 = N0 + pid * 0
            w_idx = 1 + pid * 0
        if CONCAT_W == 3:
            nb01 = nb0 + tl.cdiv(N1 // PAIR, BLOCK_N)
            if pid >= nb01:
                w_ptr = W2
                blk = pid - nb01
                n_lim = N2 + pid * 0
                col0 = N0 + N1 + pid * 0
                w_idx = 2 + pid * 0

    rm = tl.arange(0, BLOCK_M)
    m_ok = rm < M
    rn = blk * BLOCK_N + tl.arange(0, BLOCK_N)
    if ROPE:  # program column t -> the pair (j, j + h) of head t // h, j = t % h
        half = rope_dim // 2
        n_ok = rn < n_lim // 2
        rj = rn % half
        rn = (rn // half) * rope_dim + rj
        w_rows2 = w_ptr + (rn + half).to(tl.int64)[:, None] * K
    else:
        n_ok = rn < n_lim
    w_rows = w_ptr + rn.to(tl.int64)[:, None] * K
    if SILU_MUL:
        w_rows2 = W1 + rn.to(tl.int64)[:, None] * K
    elif not ROPE:
        w_rows2 = w_rows  # never read: _load_tile loads a second weight only when TWO

    TWO: tl.constexpr = SILU_MUL or ROPE  # a second accumulator: the up projection, or the pair's other half
    if PREFETCH:  # the first weight tile is requested before the norm prologue, so HBM starts streaming at once
        x, w, u = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, 0, K, stride_x, TWO, BLOCK_K)
    if HAS_NORM:  # per-row 1/rms over the whole row (the row is small and L2-resident)
        ss = tl.zeros([BLOCK_M], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            xk = tl.load(X + rm[:, None] * stride_x + rk[None, :], mask=m_ok[:, None] & (rk[None, :] < K), other=0.0)
            xk = xk.to(tl.float32)
            ss += tl.sum(xk * xk, axis=1)
        rstd = tl.rsqrt(ss / K + eps)

    if BLOCK_M == 1:
        acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        if TWO:
            acc_u = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if TWO:
            acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)

    for k0 in range(0, K, BLOCK_K):
        if PREFETCH:
            x_nxt, w_nxt, u_nxt = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0 + BLOCK_K, K, stride_x, TWO,
                                             BLOCK_K)
        else:
            x, w, u = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0, K, stride_x, TWO, BLOCK_K)
        rk = k0 + tl.arange(0, BLOCK_K)
        k_ok = rk < K
        if HAS_NORM:
            xf = x.to(tl.float32) * rstd[:, None]
            if NORM_CAST:
                xf = xf.to(T).to(tl.float32)
            nw = tl.load(NW + rk, mask=k_ok, other=0.0).to(tl.float32)
            if NORM_OFFSET:
                nw = nw + norm_offset
            x = (xf * nw[None, :]).to(T)
        if BLOCK_M == 1:
            xr = x.to(tl.float32)  # [1, BLOCK_K] broadcasts over the BLOCK_N weight rows
            acc += w.to(tl.float32) * xr
            if TWO:
                acc_u += u.to(tl.float32) * xr
        else:
            acc = tl.dot(x, tl.trans(w), acc, input_precision=PRECISION)
            if TWO:
                acc_u = tl.dot(x, tl.trans(u), acc_u, input_precision=PRECISION)
        if PREFETCH:
            x, w, u = x_nxt, w_nxt, u_nxt

    if BLOCK_M == 1:
        y = tl.sum(acc, axis=1)[None, :]
        if TWO:
            y_u = tl.sum(acc_u, axis=1)[None, :]
    else:
        y = acc
        if TWO:
            y_u = acc_u
    y = y.to(T)  # the GEMM's output dtype, as eager rounds it
    out_mask = m_ok[:, None] & n_ok[None, :]
    if SILU_MUL:
        g = y.to(tl.float32)
        s = (g / (1.0 + tl.exp(-g))).to(T)
        y = (s.to(tl.float32) * y_u.to(T).to(tl.float32)).to(T)
    if HAS_RES:
        r = tl.load(R + rm[:, None] * stride_r + rn[None, :], mask=out_mask, other=0.0)
        y = (y.to(tl.float32) + r.to(tl.float32)).to(T)
    if ROPE:
        y2 = y_u.to(T)  # the pair's other half: columns j + h
        cs = rm[:, None] * stride_cs + rj[None, :]
        c1 = tl.load(COS + cs, mask=out_mask, other=0.0).to(tl.float32)
        s1 = tl.load(SIN + cs, mask=out_mask, other=0.0).to(tl.float32)
        c2 = tl.load(COS + cs + half, mask=out_mask, other=0.0).to(tl.float32)
        s2 = tl.load(SIN + cs + half, mask=out_mask, other=0.0).to(tl.float32)
        a, b = y.to(tl.float32), y2.to(tl.float32)
        ra = ((a * c1).to(T).to(tl.float32) + (-b * s1).to(T).to(tl.float32)).to(T)
        rb = ((b * c2).to(T).to(tl.float32) + (a * s2).to(T).to(tl.float32)).to(T)
        rotate = w_idx < rope_weights
        y = tl.where(rotate, ra, y)
        y2 = tl.where(rotate, rb, y2)
        tl.store(Y + rm[:, None] * stride_y + (col0 + rn + half)[None, :], y2, mask=out_mask)
    if CACHE_MASK != 0:
        _store_cache_rows(C0, C1, C2, IDX, y, rn, w_idx, rm, out_mask, seq_len, cache_len, head_dim, sc_b, sc_h,
                          sc_l, sc_d, CACHE_MASK)
        if ROPE:
            _store_cache_rows(C0, C1, C2, IDX, y2, rn + half, w_idx, rm, out_mask, seq_len, cache_len, head_dim,
                              sc_b, sc_h, sc_l, sc_d, CACHE_MASK)
    tl.store(Y + rm[:, None] * stride_y + (col0 + rn)[None, :], y, mask=out_mask)

@triton.jit
def _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0, K, stride_x, TWO: tl.constexpr, BLOCK_K: tl.constexpr):
    """Columns k0 .. k0 + BLOCK_K of x [BLOCK_M, BLOCK_K] and of the program's weight rows [BLOCK_N, BLOCK_K]
    (u: the second weight's rows when TWO, else w again); zeros past K."""
    rk = k0 + tl.arange(0, BLOCK_K)
    k_ok = rk < K
    x = tl.load(X + rm[:, None] * stride_x + rk[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
    w_mask = n_ok[:, None] & k_ok[None, :]
    w = tl.load(w_rows + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
    u = w
    if TWO:
        u = tl.load(w_rows2 + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
    return x, w, u

@triton.jit
def _store_cache_rows(C0, C1, C2, IDX, y, cols, w_idx, rm, mask, seq_len, cache_len, head_dim, sc_b, sc_h, sc_l,
                      sc_d, CACHE_MASK: tl.constexpr):
    """y [BLOCK_M, BLOCK_N] (rows rm, columns ``cols`` of output w_idx) into C_{w_idx}[b, col // HD, IDX[s],
    col % HD] for row m = b * S + s, as ``C.index_put_([None, None, IDX], heads)`` stores them: a negative
    position counts from the end; one past either end is skipped (eager raises there)."""
    pos = tl.load(IDX + rm % seq_len).to(tl.int64)  # in bounds for the masked rows too
    pos = tl.where(pos < 0, pos + cache_len, pos)
    ok = mask & ((pos >= 0) & (pos < cache_len))[:, None]
    off = ((rm // seq_len).to(tl.int64) * sc_b + pos * sc_l)[:, None] + \
        ((cols // head_dim).to(tl.int64) * sc_h + (cols % head_dim).to(tl.int64) * sc_d)[None, :]
    which = (cols * 0 + w_idx)[None, :]  # a vector, not the scalar: Triton's interpreter masks with no scalar
    if CACHE_MASK & 1:
        tl.store(C0 + off, y, mask=ok & (which == 0))
    if CACHE_MASK & 2:
        tl.store(C1 + off, y, mask=ok & (which == 1))
    if CACHE_MASK & 4:
        tl.store(C2 + off, y, mask=ok & (which == 2))
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/j6/cj6eiecvwv3w6ixghl3akujbjvn7qlwbyocn3pcofsiesvpmzzer.py
# Unsorted Source Nodes: [], Original ATen: []
# Source node to ATen node mapping:
triton_for_fused_6 = async_compile.triton('triton_for_fused_6', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties

@triton_heuristics.foreach(
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*i64', 'in_ptr1': '*i64', 'in_ptr2': '*i64', 'in_ptr3': '*i64', 'in_ptr4': '*i64', 'in_ptr5': '*i64', 'in_ptr6': '*i64', 'in_ptr7': '*i64', 'in_ptr8': '*i64', 'in_ptr9': '*i64', 'in_ptr10': '*i64', 'in_ptr11': '*i64', 'in_ptr12': '*i64', 'in_ptr13': '*i64', 'in_ptr14': '*i64', 'in_ptr15': '*i64', 'out_ptr0': '*i64', 'out_ptr1': '*i64', 'out_ptr2': '*i64', 'out_ptr3': '*i64', 'out_ptr4': '*i64', 'out_ptr5': '*i64', 'out_ptr6': '*i64', 'out_ptr7': '*i64', 'out_ptr8': '*i64', 'out_ptr9': '*i64', 'out_ptr10': '*i64', 'out_ptr11': '*i64', 'out_ptr12': '*i64', 'out_ptr13': '*i64', 'out_ptr14': '*i64', 'out_ptr15': '*i64', 'out_ptr16': '*i64'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'enable_fp_fusion': True, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (9,): [['tt.divisibility', 16]], (10,): [['tt.divisibility', 16]], (11,): [['tt.divisibility', 16]], (12,): [['tt.divisibility', 16]], (13,): [['tt.divisibility', 16]], (14,): [['tt.divisibility', 16]], (15,): [['tt.divisibility', 16]], (16,): [['tt.divisibility', 16]], (17,): [['tt.divisibility', 16]], (18,): [['tt.divisibility', 16]], (19,): [['tt.divisibility', 16]], (20,): [['tt.divisibility', 16]], (21,): [['tt.divisibility', 16]], (22,): [['tt.divisibility', 16]], (23,): [['tt.divisibility', 16]], (24,): [['tt.divisibility', 16]], (25,): [['tt.divisibility', 16]], (26,): [['tt.divisibility', 16]], (27,): [['tt.divisibility', 16]], (28,): [['tt.divisibility', 16]], (29,): [['tt.divisibility', 16]], (30,): [['tt.divisibility', 16]], (31,): [['tt.divisibility', 16]], (32,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'SequentialComboKernelGrid', 'combo_grid_meta': {'num_kernels': 16, 'min_blocks': 0, 'default_config': {'XBLOCK': 1024}, 'no_x_dim_0': False, 'xnumel_0': 1, 'no_x_dim_1': False, 'xnumel_1': 1, 'no_x_dim_2': False, 'xnumel_2': 1, 'no_x_dim_3': False, 'xnumel_3': 1, 'no_x_dim_4': False, 'xnumel_4': 1, 'no_x_dim_5': False, 'xnumel_5': 1, 'no_x_dim_6': False, 'xnumel_6': 1, 'no_x_dim_7': False, 'xnumel_7': 1, 'no_x_dim_8': False, 'xnumel_8': 1, 'no_x_dim_9': False, 'xnumel_9': 1, 'no_x_dim_10': False, 'xnumel_10': 1, 'no_x_dim_11': False, 'xnumel_11': 1, 'no_x_dim_12': False, 'xnumel_12': 1, 'no_x_dim_13': False, 'xnumel_13': 1, 'no_x_dim_14': False, 'xnumel_14': 1, 'no_x_dim_15': False, 'xnumel_15': 1}, 'kernel_name': 'triton_for_fused_6', 'mutated_arg_names': ['in_ptr0', 'in_ptr1', 'in_ptr10', 'in_ptr11', 'in_ptr12', 'in_ptr13', 'in_ptr14', 'in_ptr15', 'in_ptr2', 'in_ptr3', 'in_ptr4', 'in_ptr5', 'in_ptr6', 'in_ptr7', 'in_ptr8', 'in_ptr9', 'out_ptr0', 'out_ptr1', 'out_ptr10', 'out_ptr11', 'out_ptr12', 'out_ptr13', 'out_ptr14', 'out_ptr16', 'out_ptr2', 'out_ptr3', 'out_ptr4', 'out_ptr5', 'out_ptr6', 'out_ptr7', 'out_ptr8', 'out_ptr9'], 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False},
)
@triton.jit
def triton_for_fused_6(in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, in_ptr5, in_ptr6, in_ptr7, in_ptr8, in_ptr9, in_ptr10, in_ptr11, in_ptr12, in_ptr13, in_ptr14, in_ptr15, out_ptr0, out_ptr1, out_ptr2, out_ptr3, out_ptr4, out_ptr5, out_ptr6, out_ptr7, out_ptr8, out_ptr9, out_ptr10, out_ptr11, out_ptr12, out_ptr13, out_ptr14, out_ptr15, out_ptr16):
    pid = tl.program_id(0)
    XBLOCK: tl.constexpr = 1024
    num_xblocks_0 = tl.cdiv(1, XBLOCK)
    num_xblocks_1 = num_xblocks_0 + tl.cdiv(1, XBLOCK)
    num_xblocks_2 = num_xblocks_1 + tl.cdiv(1, XBLOCK)
    num_xblocks_3 = num_xblocks_2 + tl.cdiv(1, XBLOCK)
    num_xblocks_4 = num_xblocks_3 + tl.cdiv(1, XBLOCK)
    num_xblocks_5 = num_xblocks_4 + tl.cdiv(1, XBLOCK)
    num_xblocks_6 = num_xblocks_5 + tl.cdiv(1, XBLOCK)
    num_xblocks_7 = num_xblocks_6 + tl.cdiv(1, XBLOCK)
    num_xblocks_8 = num_xblocks_7 + tl.cdiv(1, XBLOCK)
    num_xblocks_9 = num_xblocks_8 + tl.cdiv(1, XBLOCK)
    num_xblocks_10 = num_xblocks_9 + tl.cdiv(1, XBLOCK)
    num_xblocks_11 = num_xblocks_10 + tl.cdiv(1, XBLOCK)
    num_xblocks_12 = num_xblocks_11 + tl.cdiv(1, XBLOCK)
    num_xblocks_13 = num_xblocks_12 + tl.cdiv(1, XBLOCK)
    num_xblocks_14 = num_xblocks_13 + tl.cdiv(1, XBLOCK)
    num_xblocks_15 = num_xblocks_14 + tl.cdiv(1, XBLOCK)
    if pid < num_xblocks_0:
        pid_offset = pid
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp0 = tl.load(in_ptr0 + (0))
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK])
        tmp2 = tl.where(xmask, tmp1, 0)
        tmp3 = tl.full([1], 1, tl.int64)
        tmp4 = tmp2 + tmp3
        tl.store(out_ptr0 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp4, xmask)
    elif pid < num_xblocks_1:
        pid_offset = pid - num_xblocks_0
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp5 = tl.load(in_ptr1 + (0))
        tmp6 = tl.broadcast_to(tmp5, [XBLOCK])
        tmp7 = tl.where(xmask, tmp6, 0)
        tmp8 = tl.full([1], 1, tl.int64)
        tmp9 = tmp7 + tmp8
        tl.store(out_ptr1 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp9, xmask)
    elif pid < num_xblocks_2:
        pid_offset = pid - num_xblocks_1
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp10 = tl.load(in_ptr2 + (0))
        tmp11 = tl.broadcast_to(tmp10, [XBLOCK])
        tmp12 = tl.where(xmask, tmp11, 0)
        tmp13 = tl.full([1], 1, tl.int64)
        tmp14 = tmp12 + tmp13
        tl.store(out_ptr2 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp14, xmask)
    elif pid < num_xblocks_3:
        pid_offset = pid - num_xblocks_2
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp15 = tl.load(in_ptr3 + (0))
        tmp16 = tl.broadcast_to(tmp15, [XBLOCK])
        tmp17 = tl.where(xmask, tmp16, 0)
        tmp18 = tl.full([1], 1, tl.int64)
        tmp19 = tmp17 + tmp18
        tl.store(out_ptr3 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp19, xmask)
    elif pid < num_xblocks_4:
        pid_offset = pid - num_xblocks_3
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp20 = tl.load(in_ptr4 + (0))
        tmp21 = tl.broadcast_to(tmp20, [XBLOCK])
        tmp22 = tl.where(xmask, tmp21, 0)
        tmp23 = tl.full([1], 1, tl.int64)
        tmp24 = tmp22 + tmp23
        tl.store(out_ptr4 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp24, xmask)
    elif pid < num_xblocks_5:
        pid_offset = pid - num_xblocks_4
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp25 = tl.load(in_ptr5 + (0))
        tmp26 = tl.broadcast_to(tmp25, [XBLOCK])
        tmp27 = tl.where(xmask, tmp26, 0)
        tmp28 = tl.full([1], 1, tl.int64)
        tmp29 = tmp27 + tmp28
        tl.store(out_ptr5 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp29, xmask)
    elif pid < num_xblocks_6:
        pid_offset = pid - num_xblocks_5
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp30 = tl.load(in_ptr6 + (0))
        tmp31 = tl.broadcast_to(tmp30, [XBLOCK])
        tmp32 = tl.where(xmask, tmp31, 0)
        tmp33 = tl.full([1], 1, tl.int64)
        tmp34 = tmp32 + tmp33
        tl.store(out_ptr6 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp34, xmask)
    elif pid < num_xblocks_7:
        pid_offset = pid - num_xblocks_6
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp35 = tl.load(in_ptr7 + (0))
        tmp36 = tl.broadcast_to(tmp35, [XBLOCK])
        tmp37 = tl.where(xmask, tmp36, 0)
        tmp38 = tl.full([1], 1, tl.int64)
        tmp39 = tmp37 + tmp38
        tl.store(out_ptr7 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp39, xmask)
    elif pid < num_xblocks_8:
        pid_offset = pid - num_xblocks_7
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp40 = tl.load(in_ptr8 + (0))
        tmp41 = tl.broadcast_to(tmp40, [XBLOCK])
        tmp42 = tl.where(xmask, tmp41, 0)
        tmp43 = tl.full([1], 1, tl.int64)
        tmp44 = tmp42 + tmp43
        tl.store(out_ptr8 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp44, xmask)
    elif pid < num_xblocks_9:
        pid_offset = pid - num_xblocks_8
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp45 = tl.load(in_ptr9 + (0))
        tmp46 = tl.broadcast_to(tmp45, [XBLOCK])
        tmp47 = tl.where(xmask, tmp46, 0)
        tmp48 = tl.full([1], 1, tl.int64)
        tmp49 = tmp47 + tmp48
        tl.store(out_ptr9 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp49, xmask)
    elif pid < num_xblocks_10:
        pid_offset = pid - num_xblocks_9
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp50 = tl.load(in_ptr10 + (0))
        tmp51 = tl.broadcast_to(tmp50, [XBLOCK])
        tmp52 = tl.where(xmask, tmp51, 0)
        tmp53 = tl.full([1], 1, tl.int64)
        tmp54 = tmp52 + tmp53
        tl.store(out_ptr10 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp54, xmask)
    elif pid < num_xblocks_11:
        pid_offset = pid - num_xblocks_10
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp55 = tl.load(in_ptr11 + (0))
        tmp56 = tl.broadcast_to(tmp55, [XBLOCK])
        tmp57 = tl.where(xmask, tmp56, 0)
        tmp58 = tl.full([1], 1, tl.int64)
        tmp59 = tmp57 + tmp58
        tl.store(out_ptr11 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp59, xmask)
    elif pid < num_xblocks_12:
        pid_offset = pid - num_xblocks_11
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp60 = tl.load(in_ptr12 + (0))
        tmp61 = tl.broadcast_to(tmp60, [XBLOCK])
        tmp62 = tl.where(xmask, tmp61, 0)
        tmp63 = tl.full([1], 1, tl.int64)
        tmp64 = tmp62 + tmp63
        tl.store(out_ptr12 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp64, xmask)
    elif pid < num_xblocks_13:
        pid_offset = pid - num_xblocks_12
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp65 = tl.load(in_ptr13 + (0))
        tmp66 = tl.broadcast_to(tmp65, [XBLOCK])
        tmp67 = tl.where(xmask, tmp66, 0)
        tmp68 = tl.full([1], 1, tl.int64)
        tmp69 = tmp67 + tmp68
        tl.store(out_ptr13 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp69, xmask)
    elif pid < num_xblocks_14:
        pid_offset = pid - num_xblocks_13
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp70 = tl.load(in_ptr14 + (0))
        tmp71 = tl.broadcast_to(tmp70, [XBLOCK])
        tmp72 = tl.where(xmask, tmp71, 0)
        tmp73 = tl.full([1], 1, tl.int64)
        tmp74 = tmp72 + tmp73
        tl.store(out_ptr14 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp74, xmask)
    elif pid < num_xblocks_15:
        pid_offset = pid - num_xblocks_14
        xnumel = 1
        r0_numel = 1
        xoffset = pid_offset * XBLOCK
        xindex = xoffset + tl.arange(0, XBLOCK)[:]
        xmask = xindex < xnumel
        tmp75 = tl.load(in_ptr15 + (0))
        tmp76 = tl.broadcast_to(tmp75, [XBLOCK])
        tmp77 = tl.where(xmask, tmp76, 0)
        tmp78 = tl.full([1], 0, tl.int64)
        tmp79 = tmp78 + tmp77
        tmp80 = tl.full([1], 1, tl.int64)
        tmp81 = tmp77 + tmp80
        tl.store(out_ptr15 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp79, xmask)
        tl.store(out_ptr16 + (tl.full([XBLOCK], 0, tl.int32).broadcast_to([XBLOCK])), tmp81, xmask)
    else:
        pass
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/i2/ci2kyqypqjsvda6rjwdhsvaqlczinjnhsaxzcjzxayvjmoeqiqjw.py
# Topologically Sorted Source Nodes: [hidden_states_160, pow_33, variance_32, add_130, rsqrt_32, hidden_states_161, to_85, hidden_states_162], Original ATen: [aten._to_copy, aten.pow, aten.mean, aten.add, aten.rsqrt, aten.mul]
# Source node to ATen node mapping:
#   add_130 => add_162
#   hidden_states_160 => convert_element_type_420
#   hidden_states_161 => mul_162
#   hidden_states_162 => mul_163
#   pow_33 => pow_33
#   rsqrt_32 => rsqrt_32
#   to_85 => convert_element_type_421
#   variance_32 => mean_32
# Graph fragment:
#   %buf312 : Tensor  = PlaceHolder[target=buf312]
#   %arg196_1 : Tensor "bf16[2048][1]cuda:0" = PlaceHolder[target=arg196_1]
#   %buf313 : Tensor "f32[1, 1, 1][1, 1, 1]cuda:0" = PlaceHolder[target=buf313]
#   %reshape_default_63 : Tensor "bf16[1, 1, 2048][2048, 2048, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%empty_95, [1, 1, 2048]), kwargs = {})
#   %convert_element_type_420 : Tensor "f32[1, 1, 2048][2048, 2048, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%reshape_default_63, torch.float32), kwargs = {})
#   %pow_33 : Tensor "f32[1, 1, 2048][2048, 2048, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.pow.Tensor_Scalar](args = (%convert_element_type_420, 2), kwargs = {})
#   %mean_32 : Tensor "f32[1, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mean.dim](args = (%pow_33, [-1], True), kwargs = {})
#   %add_162 : Tensor "f32[1, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mean_32, 1e-05), kwargs = {})
#   %rsqrt_32 : Tensor "f32[1, 1, 1][1, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.rsqrt.default](args = (%add_162,), kwargs = {})
#   %mul_162 : Tensor "f32[1, 1, 2048][2048, 2048, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_420, %rsqrt_32), kwargs = {})
#   %convert_element_type_421 : Tensor "bf16[1, 1, 2048][2048, 2048, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_162, torch.bfloat16), kwargs = {})
#   %mul_163 : Tensor "bf16[1, 1, 2048][2048, 2048, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%arg196_1, %convert_element_type_421), kwargs = {})
#   return %buf313,%mul_163
triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_7 = async_compile.triton('triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_7', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

@triton_heuristics.reduction(
    size_hints={'x': 1, 'r0_': 2048},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'out_ptr1': '*bf16', 'xnumel': 'constexpr', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'R0_BLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {'xnumel': 1}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_7', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 3, 'num_store': 1, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'r0_': 12288}}
)
@triton.jit
def triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_7(in_ptr0, in_ptr1, out_ptr1, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 1
    r0_numel = 2048
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    _tmp4 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_0 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_0), r0_mask, eviction_policy='evict_last', other=0.0).to(tl.float32)
        tmp1 = tmp0.to(tl.float32)
        tmp2 = tmp1 * tmp1
        tmp3 = tl.broadcast_to(tmp2, [XBLOCK, R0_BLOCK])
        tmp5 = _tmp4 + tmp3
        _tmp4 = tl.where(r0_mask, tmp5, _tmp4)
    tmp4 = tl.sum(_tmp4, 1)[:, None]
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_0 = r0_index
        tmp6 = tl.load(in_ptr1 + (r0_0), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp7 = tl.load(in_ptr0 + (r0_0), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp8 = tmp7.to(tl.float32)
        tmp9 = tl.full([1, 1], 2048.0, tl.float32)
        tmp10 = (tmp4 / tmp9)
        tmp11 = tl.full([1, 1], 1e-05, tl.float32)
        tmp12 = tmp10 + tmp11
        tmp13 = libdevice.rsqrt(tmp12)
        tmp14 = tmp8 * tmp13
        tmp15 = tmp14.to(tl.float32)
        tmp16 = tmp6 * tmp15
        tl.store(out_ptr1 + (tl.broadcast_to(r0_0, [XBLOCK, R0_BLOCK])), tmp16, r0_mask)
''', device_str='cuda')


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def recursively_apply_fns(self, fns):
        new_callables = []
        for fn, c in zip(fns, self.partitions):
            new_callables.append(fn(c))
        self.partitions = new_callables

    def call(self, args):
        arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1, arg19_1, arg20_1, arg21_1, arg22_1, arg23_1, arg24_1, arg25_1, arg26_1, arg27_1, arg28_1, arg29_1, arg30_1, arg31_1, arg32_1, arg33_1, arg34_1, arg35_1, arg36_1, arg37_1, arg38_1, arg39_1, arg40_1, arg41_1, arg42_1, arg43_1, arg44_1, arg45_1, arg46_1, arg47_1, arg48_1, arg49_1, arg50_1, arg51_1, arg52_1, arg53_1, arg54_1, arg55_1, arg56_1, arg57_1, arg58_1, arg59_1, arg60_1, arg61_1, arg62_1, arg63_1, arg64_1, arg65_1, arg66_1, arg67_1, arg68_1, arg69_1, arg70_1, arg71_1, arg72_1, arg73_1, arg74_1, arg75_1, arg76_1, arg77_1, arg78_1, arg79_1, arg80_1, arg81_1, arg82_1, arg83_1, arg84_1, arg85_1, arg86_1, arg87_1, arg88_1, arg89_1, arg90_1, arg91_1, arg92_1, arg93_1, arg94_1, arg95_1, arg96_1, arg97_1, arg98_1, arg99_1, arg100_1, arg101_1, arg102_1, arg103_1, arg104_1, arg105_1, arg106_1, arg107_1, arg108_1, arg109_1, arg110_1, arg111_1, arg112_1, arg113_1, arg114_1, arg115_1, arg116_1, arg117_1, arg118_1, arg119_1, arg120_1, arg121_1, arg122_1, arg123_1, arg124_1, arg125_1, arg126_1, arg127_1, arg128_1, arg129_1, arg130_1, arg131_1, arg132_1, arg133_1, arg134_1, arg135_1, arg136_1, arg137_1, arg138_1, arg139_1, arg140_1, arg141_1, arg142_1, arg143_1, arg144_1, arg145_1, arg146_1, arg147_1, arg148_1, arg149_1, arg150_1, arg151_1, arg152_1, arg153_1, arg154_1, arg155_1, arg156_1, arg157_1, arg158_1, arg159_1, arg160_1, arg161_1, arg162_1, arg163_1, arg164_1, arg165_1, arg166_1, arg167_1, arg168_1, arg169_1, arg170_1, arg171_1, arg172_1, arg173_1, arg174_1, arg175_1, arg176_1, arg177_1, arg178_1, arg179_1, arg180_1, arg181_1, arg182_1, arg183_1, arg184_1, arg185_1, arg186_1, arg187_1, arg188_1, arg189_1, arg190_1, arg191_1, arg192_1, arg193_1, arg194_1, arg195_1, arg196_1 = args
        args.clear()
        assert_size_stride(arg0_1, (1, 1), (1, 1))
        assert_size_stride(arg1_1, (128256, 2048), (2048, 1))
        assert_size_stride(arg2_1, (1, 1), (1, 1))
        assert_size_stride(arg3_1, (), ())
        assert_size_stride(arg4_1, (32, ), (1, ))
        assert_size_stride(arg5_1, (2048, ), (1, ))
        assert_size_stride(arg6_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg7_1, (512, 2048), (2048, 1))
        assert_size_stride(arg8_1, (512, 2048), (2048, 1))
        assert_size_stride(arg9_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg10_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg11_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg12_1, (2048, ), (1, ))
        assert_size_stride(arg13_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg14_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg15_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg16_1, (2048, ), (1, ))
        assert_size_stride(arg17_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg18_1, (512, 2048), (2048, 1))
        assert_size_stride(arg19_1, (512, 2048), (2048, 1))
        assert_size_stride(arg20_1, (), ())
        assert_size_stride(arg21_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg22_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg23_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg24_1, (2048, ), (1, ))
        assert_size_stride(arg25_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg26_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg27_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg28_1, (2048, ), (1, ))
        assert_size_stride(arg29_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg30_1, (512, 2048), (2048, 1))
        assert_size_stride(arg31_1, (512, 2048), (2048, 1))
        assert_size_stride(arg32_1, (), ())
        assert_size_stride(arg33_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg34_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg35_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg36_1, (2048, ), (1, ))
        assert_size_stride(arg37_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg38_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg39_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg40_1, (2048, ), (1, ))
        assert_size_stride(arg41_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg42_1, (512, 2048), (2048, 1))
        assert_size_stride(arg43_1, (512, 2048), (2048, 1))
        assert_size_stride(arg44_1, (), ())
        assert_size_stride(arg45_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg46_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg47_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg48_1, (2048, ), (1, ))
        assert_size_stride(arg49_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg50_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg51_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg52_1, (2048, ), (1, ))
        assert_size_stride(arg53_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg54_1, (512, 2048), (2048, 1))
        assert_size_stride(arg55_1, (512, 2048), (2048, 1))
        assert_size_stride(arg56_1, (), ())
        assert_size_stride(arg57_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg58_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg59_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg60_1, (2048, ), (1, ))
        assert_size_stride(arg61_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg62_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg63_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg64_1, (2048, ), (1, ))
        assert_size_stride(arg65_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg66_1, (512, 2048), (2048, 1))
        assert_size_stride(arg67_1, (512, 2048), (2048, 1))
        assert_size_stride(arg68_1, (), ())
        assert_size_stride(arg69_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg70_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg71_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg72_1, (2048, ), (1, ))
        assert_size_stride(arg73_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg74_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg75_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg76_1, (2048, ), (1, ))
        assert_size_stride(arg77_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg78_1, (512, 2048), (2048, 1))
        assert_size_stride(arg79_1, (512, 2048), (2048, 1))
        assert_size_stride(arg80_1, (), ())
        assert_size_stride(arg81_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg82_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg83_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg84_1, (2048, ), (1, ))
        assert_size_stride(arg85_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg86_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg87_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg88_1, (2048, ), (1, ))
        assert_size_stride(arg89_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg90_1, (512, 2048), (2048, 1))
        assert_size_stride(arg91_1, (512, 2048), (2048, 1))
        assert_size_stride(arg92_1, (), ())
        assert_size_stride(arg93_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg94_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg95_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg96_1, (2048, ), (1, ))
        assert_size_stride(arg97_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg98_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg99_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg100_1, (2048, ), (1, ))
        assert_size_stride(arg101_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg102_1, (512, 2048), (2048, 1))
        assert_size_stride(arg103_1, (512, 2048), (2048, 1))
        assert_size_stride(arg104_1, (), ())
        assert_size_stride(arg105_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg106_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg107_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg108_1, (2048, ), (1, ))
        assert_size_stride(arg109_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg110_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg111_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg112_1, (2048, ), (1, ))
        assert_size_stride(arg113_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg114_1, (512, 2048), (2048, 1))
        assert_size_stride(arg115_1, (512, 2048), (2048, 1))
        assert_size_stride(arg116_1, (), ())
        assert_size_stride(arg117_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg118_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg119_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg120_1, (2048, ), (1, ))
        assert_size_stride(arg121_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg122_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg123_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg124_1, (2048, ), (1, ))
        assert_size_stride(arg125_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg126_1, (512, 2048), (2048, 1))
        assert_size_stride(arg127_1, (512, 2048), (2048, 1))
        assert_size_stride(arg128_1, (), ())
        assert_size_stride(arg129_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg130_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg131_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg132_1, (2048, ), (1, ))
        assert_size_stride(arg133_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg134_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg135_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg136_1, (2048, ), (1, ))
        assert_size_stride(arg137_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg138_1, (512, 2048), (2048, 1))
        assert_size_stride(arg139_1, (512, 2048), (2048, 1))
        assert_size_stride(arg140_1, (), ())
        assert_size_stride(arg141_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg142_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg143_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg144_1, (2048, ), (1, ))
        assert_size_stride(arg145_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg146_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg147_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg148_1, (2048, ), (1, ))
        assert_size_stride(arg149_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg150_1, (512, 2048), (2048, 1))
        assert_size_stride(arg151_1, (512, 2048), (2048, 1))
        assert_size_stride(arg152_1, (), ())
        assert_size_stride(arg153_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg154_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg155_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg156_1, (2048, ), (1, ))
        assert_size_stride(arg157_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg158_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg159_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg160_1, (2048, ), (1, ))
        assert_size_stride(arg161_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg162_1, (512, 2048), (2048, 1))
        assert_size_stride(arg163_1, (512, 2048), (2048, 1))
        assert_size_stride(arg164_1, (), ())
        assert_size_stride(arg165_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg166_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg167_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg168_1, (2048, ), (1, ))
        assert_size_stride(arg169_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg170_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg171_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg172_1, (2048, ), (1, ))
        assert_size_stride(arg173_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg174_1, (512, 2048), (2048, 1))
        assert_size_stride(arg175_1, (512, 2048), (2048, 1))
        assert_size_stride(arg176_1, (), ())
        assert_size_stride(arg177_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg178_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg179_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg180_1, (2048, ), (1, ))
        assert_size_stride(arg181_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg182_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg183_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg184_1, (2048, ), (1, ))
        assert_size_stride(arg185_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg186_1, (512, 2048), (2048, 1))
        assert_size_stride(arg187_1, (512, 2048), (2048, 1))
        assert_size_stride(arg188_1, (), ())
        assert_size_stride(arg189_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg190_1, (1, 8, 1280, 64), (655360, 81920, 64, 1))
        assert_size_stride(arg191_1, (2048, 2048), (2048, 1))
        assert_size_stride(arg192_1, (2048, ), (1, ))
        assert_size_stride(arg193_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg194_1, (8192, 2048), (2048, 1))
        assert_size_stride(arg195_1, (2048, 8192), (8192, 1))
        assert_size_stride(arg196_1, (2048, ), (1, ))
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf0 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf1 = empty_strided_cuda((1, 32, 1), (32, 1, 1), torch.float32)
            # Topologically Sorted Source Nodes: [getitem_4, expand_1, inv_freq_expanded], Original ATen: [aten.unsqueeze, aten.expand, aten._to_copy]
            stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_expand_unsqueeze_0.run(arg4_1, buf1, 32, stream=stream0)
            del arg4_1
            buf2 = empty_strided_cuda((1, 1, 1), (1, 1, 1), torch.float32)
            buf3 = reinterpret_tensor(buf2, (1, 1), (1, 1), 0); del buf2  # reuse
            # Topologically Sorted Source Nodes: [getitem_4, expand_1, inv_freq_expanded, matmul, getitem_5, position_ids_expanded], Original ATen: [aten.unsqueeze, aten.expand, aten._to_copy, aten.bmm]
            stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_bmm_expand_unsqueeze_1.run(buf3, arg2_1, 1, stream=stream0)
            del arg2_1
            buf4 = empty_strided_cuda((32, 1), (1, 1), torch.float32)
            # Topologically Sorted Source Nodes: [getitem_4, expand_1, inv_freq_expanded, matmul, getitem_5, position_ids_expanded], Original ATen: [aten.unsqueeze, aten.expand, aten._to_copy, aten.bmm]
            extern_kernels.mm(reinterpret_tensor(buf1, (32, 1), (1, 0), 0), buf3, out=buf4)
            del buf1
            del buf3
            buf5 = empty_strided_cuda((1, 64), (64, 1), torch.bfloat16)
            buf6 = empty_strided_cuda((1, 64), (64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [matmul, freqs, emb, cos, cos_1, cos_2, cos_3, sin, sin_1, sin_2, sin_3], Original ATen: [aten.bmm, aten.transpose, aten.cat, aten.cos, aten.mul, aten._to_copy, aten.unsqueeze, aten.sin]
            stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_bmm_cat_cos_mul_sin_transpose_unsqueeze_2.run(buf4, buf5, buf6, 64, stream=stream0)
            del buf4
            buf7 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            buf22 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [inputs_embeds, arange_4, cache_position, transpose_5, reshape_2, attn_output_3], Original ATen: [aten.embedding, aten.arange, aten.add, aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_transpose_view_3.run(arg0_1, arg1_1, buf7, buf22, 2048, stream=stream0)
            del arg0_1
            buf8 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [inputs_embeds, arange_4, cache_position], Original ATen: [aten.embedding, aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg3_1, buf8, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [inputs_embeds, arange_4, cache_position], Original ATen: [aten.embedding, aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf7, arg5_1, arg6_1, arg7_1, arg8_1, -1, buf5, buf6, buf0, -1, arg9_1, arg10_1, buf8, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg5_1
            del arg6_1
            del arg7_1
            del arg8_1
            del buf7
            del buf8
            buf12 = empty_strided_cuda((1, 1, 1, 1280), (1280, 1280, 1280, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [arange_3, kv_arange, kv_indices, arange_2, q_arange, q_indices, attention_mask, attention_mask_1, tensor, mask], Original ATen: [aten.arange, aten.add, aten.unsqueeze, aten.le, aten.expand, aten.lift_fresh, aten.scalar_tensor, aten.where]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_expand_le_lift_fresh_scalar_tensor_unsqueeze_where_5.run(arg3_1, buf12, 1280, stream=stream0)
            buf13 = empty_strided_cuda((2560, ), (1, ), torch.float32)
            buf14 = empty_strided_cuda((2560, ), (1, ), torch.float32)
            buf15 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear, view, query_states], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf0, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg9_1, arg10_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf13, buf14, buf15, 64, 8, 20, 1, stream=stream0)
            del arg10_1
            del arg9_1
            del buf0
            buf19 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf13, buf14, buf15, buf19, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf15
            buf21 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [inputs_embeds, transpose_5, reshape_2, attn_output_3], Original ATen: [aten.embedding, aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf19, (1, 2048), (2048, 1), 0), -1, arg11_1, arg11_1, arg11_1, buf22, -1, -1, buf21, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg11_1
            del buf19
            buf24 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf21, arg12_1, arg13_1, arg14_1, arg13_1, -1, -1, -1, buf24, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg12_1
            del arg13_1
            del arg14_1
            buf26 = buf22; del buf22  # reuse
            # Topologically Sorted Source Nodes: [down_proj], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf24, -1, arg15_1, arg15_1, arg15_1, buf21, -1, -1, buf26, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg15_1
            del buf21
            del buf24
            buf28 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf29 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_5, cache_position_1], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg20_1, buf29, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_5, cache_position_1], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf26, arg16_1, arg17_1, arg18_1, arg19_1, -1, buf5, buf6, buf28, -1, arg21_1, arg22_1, buf29, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg16_1
            del arg17_1
            del arg18_1
            del arg19_1
            del buf29
            buf33 = buf14; del buf14  # reuse
            buf34 = buf13; del buf13  # reuse
            buf35 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_7, view_3, query_states_1], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf28, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg21_1, arg22_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf33, buf34, buf35, 64, 8, 20, 1, stream=stream0)
            del arg21_1
            del arg22_1
            del buf28
            buf39 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf33, buf34, buf35, buf39, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf35
            buf41 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_10, reshape_5, attn_output_7], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf39, (1, 2048), (2048, 1), 0), -1, arg23_1, arg23_1, arg23_1, buf26, -1, -1, buf41, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg23_1
            del buf26
            buf43 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf41, arg24_1, arg25_1, arg26_1, arg25_1, -1, -1, -1, buf43, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg24_1
            del arg25_1
            del arg26_1
            buf45 = reinterpret_tensor(buf39, (1, 2048), (2048, 1), 0); del buf39  # reuse
            # Topologically Sorted Source Nodes: [down_proj_1], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf43, -1, arg27_1, arg27_1, arg27_1, buf41, -1, -1, buf45, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg27_1
            del buf41
            del buf43
            buf47 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf48 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_6, cache_position_2], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg32_1, buf48, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_6, cache_position_2], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf45, arg28_1, arg29_1, arg30_1, arg31_1, -1, buf5, buf6, buf47, -1, arg33_1, arg34_1, buf48, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg28_1
            del arg29_1
            del arg30_1
            del arg31_1
            del buf48
            buf52 = buf34; del buf34  # reuse
            buf53 = buf33; del buf33  # reuse
            buf54 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_14, view_6, query_states_2], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf47, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg33_1, arg34_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf52, buf53, buf54, 64, 8, 20, 1, stream=stream0)
            del arg33_1
            del arg34_1
            del buf47
            buf58 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf52, buf53, buf54, buf58, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf54
            buf60 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_15, reshape_8, attn_output_11], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf58, (1, 2048), (2048, 1), 0), -1, arg35_1, arg35_1, arg35_1, buf45, -1, -1, buf60, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg35_1
            del buf45
            buf62 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf60, arg36_1, arg37_1, arg38_1, arg37_1, -1, -1, -1, buf62, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg36_1
            del arg37_1
            del arg38_1
            buf64 = reinterpret_tensor(buf58, (1, 2048), (2048, 1), 0); del buf58  # reuse
            # Topologically Sorted Source Nodes: [down_proj_2], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf62, -1, arg39_1, arg39_1, arg39_1, buf60, -1, -1, buf64, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg39_1
            del buf60
            del buf62
            buf66 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf67 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_7, cache_position_3], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg44_1, buf67, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_7, cache_position_3], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf64, arg40_1, arg41_1, arg42_1, arg43_1, -1, buf5, buf6, buf66, -1, arg45_1, arg46_1, buf67, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg40_1
            del arg41_1
            del arg42_1
            del arg43_1
            del buf67
            buf71 = buf53; del buf53  # reuse
            buf72 = buf52; del buf52  # reuse
            buf73 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_21, view_9, query_states_3], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf66, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg45_1, arg46_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf71, buf72, buf73, 64, 8, 20, 1, stream=stream0)
            del arg45_1
            del arg46_1
            del buf66
            buf77 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf71, buf72, buf73, buf77, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf73
            buf79 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_20, reshape_11, attn_output_15], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf77, (1, 2048), (2048, 1), 0), -1, arg47_1, arg47_1, arg47_1, buf64, -1, -1, buf79, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg47_1
            del buf64
            buf81 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf79, arg48_1, arg49_1, arg50_1, arg49_1, -1, -1, -1, buf81, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg48_1
            del arg49_1
            del arg50_1
            buf83 = reinterpret_tensor(buf77, (1, 2048), (2048, 1), 0); del buf77  # reuse
            # Topologically Sorted Source Nodes: [down_proj_3], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf81, -1, arg51_1, arg51_1, arg51_1, buf79, -1, -1, buf83, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg51_1
            del buf79
            del buf81
            buf85 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf86 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_8, cache_position_4], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg56_1, buf86, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_8, cache_position_4], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf83, arg52_1, arg53_1, arg54_1, arg55_1, -1, buf5, buf6, buf85, -1, arg57_1, arg58_1, buf86, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg52_1
            del arg53_1
            del arg54_1
            del arg55_1
            del buf86
            buf90 = buf72; del buf72  # reuse
            buf91 = buf71; del buf71  # reuse
            buf92 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_28, view_12, query_states_4], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf85, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg57_1, arg58_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf90, buf91, buf92, 64, 8, 20, 1, stream=stream0)
            del arg57_1
            del arg58_1
            del buf85
            buf96 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf90, buf91, buf92, buf96, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf92
            buf98 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_25, reshape_14, attn_output_19], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf96, (1, 2048), (2048, 1), 0), -1, arg59_1, arg59_1, arg59_1, buf83, -1, -1, buf98, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg59_1
            del buf83
            buf100 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf98, arg60_1, arg61_1, arg62_1, arg61_1, -1, -1, -1, buf100, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg60_1
            del arg61_1
            del arg62_1
            buf102 = reinterpret_tensor(buf96, (1, 2048), (2048, 1), 0); del buf96  # reuse
            # Topologically Sorted Source Nodes: [down_proj_4], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf100, -1, arg63_1, arg63_1, arg63_1, buf98, -1, -1, buf102, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg63_1
            del buf100
            del buf98
            buf104 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf105 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_9, cache_position_5], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg68_1, buf105, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_9, cache_position_5], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf102, arg64_1, arg65_1, arg66_1, arg67_1, -1, buf5, buf6, buf104, -1, arg69_1, arg70_1, buf105, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg64_1
            del arg65_1
            del arg66_1
            del arg67_1
            del buf105
            buf109 = buf91; del buf91  # reuse
            buf110 = buf90; del buf90  # reuse
            buf111 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_35, view_15, query_states_5], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf104, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg69_1, arg70_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf109, buf110, buf111, 64, 8, 20, 1, stream=stream0)
            del arg69_1
            del arg70_1
            del buf104
            buf115 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf109, buf110, buf111, buf115, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf111
            buf117 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_30, reshape_17, attn_output_23], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf115, (1, 2048), (2048, 1), 0), -1, arg71_1, arg71_1, arg71_1, buf102, -1, -1, buf117, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg71_1
            del buf102
            buf119 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf117, arg72_1, arg73_1, arg74_1, arg73_1, -1, -1, -1, buf119, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg72_1
            del arg73_1
            del arg74_1
            buf121 = reinterpret_tensor(buf115, (1, 2048), (2048, 1), 0); del buf115  # reuse
            # Topologically Sorted Source Nodes: [down_proj_5], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf119, -1, arg75_1, arg75_1, arg75_1, buf117, -1, -1, buf121, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg75_1
            del buf117
            del buf119
            buf123 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf124 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_10, cache_position_6], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg80_1, buf124, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_10, cache_position_6], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf121, arg76_1, arg77_1, arg78_1, arg79_1, -1, buf5, buf6, buf123, -1, arg81_1, arg82_1, buf124, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg76_1
            del arg77_1
            del arg78_1
            del arg79_1
            del buf124
            buf128 = buf110; del buf110  # reuse
            buf129 = buf109; del buf109  # reuse
            buf130 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_42, view_18, query_states_6], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf123, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg81_1, arg82_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf128, buf129, buf130, 64, 8, 20, 1, stream=stream0)
            del arg81_1
            del arg82_1
            del buf123
            buf134 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf128, buf129, buf130, buf134, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf130
            buf136 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_35, reshape_20, attn_output_27], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf134, (1, 2048), (2048, 1), 0), -1, arg83_1, arg83_1, arg83_1, buf121, -1, -1, buf136, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg83_1
            del buf121
            buf138 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf136, arg84_1, arg85_1, arg86_1, arg85_1, -1, -1, -1, buf138, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg84_1
            del arg85_1
            del arg86_1
            buf140 = reinterpret_tensor(buf134, (1, 2048), (2048, 1), 0); del buf134  # reuse
            # Topologically Sorted Source Nodes: [down_proj_6], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf138, -1, arg87_1, arg87_1, arg87_1, buf136, -1, -1, buf140, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg87_1
            del buf136
            del buf138
            buf142 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf143 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_11, cache_position_7], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg92_1, buf143, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_11, cache_position_7], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf140, arg88_1, arg89_1, arg90_1, arg91_1, -1, buf5, buf6, buf142, -1, arg93_1, arg94_1, buf143, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg88_1
            del arg89_1
            del arg90_1
            del arg91_1
            del buf143
            buf147 = buf129; del buf129  # reuse
            buf148 = buf128; del buf128  # reuse
            buf149 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_49, view_21, query_states_7], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf142, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg93_1, arg94_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf147, buf148, buf149, 64, 8, 20, 1, stream=stream0)
            del arg93_1
            del arg94_1
            del buf142
            buf153 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf147, buf148, buf149, buf153, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf149
            buf155 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_40, reshape_23, attn_output_31], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf153, (1, 2048), (2048, 1), 0), -1, arg95_1, arg95_1, arg95_1, buf140, -1, -1, buf155, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg95_1
            del buf140
            buf157 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf155, arg96_1, arg97_1, arg98_1, arg97_1, -1, -1, -1, buf157, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg96_1
            del arg97_1
            del arg98_1
            buf159 = reinterpret_tensor(buf153, (1, 2048), (2048, 1), 0); del buf153  # reuse
            # Topologically Sorted Source Nodes: [down_proj_7], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf157, -1, arg99_1, arg99_1, arg99_1, buf155, -1, -1, buf159, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg99_1
            del buf155
            del buf157
            buf161 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf162 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_12, cache_position_8], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg104_1, buf162, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_12, cache_position_8], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf159, arg100_1, arg101_1, arg102_1, arg103_1, -1, buf5, buf6, buf161, -1, arg105_1, arg106_1, buf162, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg100_1
            del arg101_1
            del arg102_1
            del arg103_1
            del buf162
            buf166 = buf148; del buf148  # reuse
            buf167 = buf147; del buf147  # reuse
            buf168 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_56, view_24, query_states_8], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf161, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg105_1, arg106_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf166, buf167, buf168, 64, 8, 20, 1, stream=stream0)
            del arg105_1
            del arg106_1
            del buf161
            buf172 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf166, buf167, buf168, buf172, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf168
            buf174 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_45, reshape_26, attn_output_35], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf172, (1, 2048), (2048, 1), 0), -1, arg107_1, arg107_1, arg107_1, buf159, -1, -1, buf174, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg107_1
            del buf159
            buf176 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf174, arg108_1, arg109_1, arg110_1, arg109_1, -1, -1, -1, buf176, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg108_1
            del arg109_1
            del arg110_1
            buf178 = reinterpret_tensor(buf172, (1, 2048), (2048, 1), 0); del buf172  # reuse
            # Topologically Sorted Source Nodes: [down_proj_8], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf176, -1, arg111_1, arg111_1, arg111_1, buf174, -1, -1, buf178, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg111_1
            del buf174
            del buf176
            buf180 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf181 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_13, cache_position_9], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg116_1, buf181, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_13, cache_position_9], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf178, arg112_1, arg113_1, arg114_1, arg115_1, -1, buf5, buf6, buf180, -1, arg117_1, arg118_1, buf181, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg112_1
            del arg113_1
            del arg114_1
            del arg115_1
            del buf181
            buf185 = buf167; del buf167  # reuse
            buf186 = buf166; del buf166  # reuse
            buf187 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_63, view_27, query_states_9], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf180, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg117_1, arg118_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf185, buf186, buf187, 64, 8, 20, 1, stream=stream0)
            del arg117_1
            del arg118_1
            del buf180
            buf191 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf185, buf186, buf187, buf191, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf187
            buf193 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_50, reshape_29, attn_output_39], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf191, (1, 2048), (2048, 1), 0), -1, arg119_1, arg119_1, arg119_1, buf178, -1, -1, buf193, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg119_1
            del buf178
            buf195 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf193, arg120_1, arg121_1, arg122_1, arg121_1, -1, -1, -1, buf195, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg120_1
            del arg121_1
            del arg122_1
            buf197 = reinterpret_tensor(buf191, (1, 2048), (2048, 1), 0); del buf191  # reuse
            # Topologically Sorted Source Nodes: [down_proj_9], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf195, -1, arg123_1, arg123_1, arg123_1, buf193, -1, -1, buf197, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg123_1
            del buf193
            del buf195
            buf199 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf200 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_14, cache_position_10], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg128_1, buf200, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_14, cache_position_10], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf197, arg124_1, arg125_1, arg126_1, arg127_1, -1, buf5, buf6, buf199, -1, arg129_1, arg130_1, buf200, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg124_1
            del arg125_1
            del arg126_1
            del arg127_1
            del buf200
            buf204 = buf186; del buf186  # reuse
            buf205 = buf185; del buf185  # reuse
            buf206 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_70, view_30, query_states_10], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf199, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg129_1, arg130_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf204, buf205, buf206, 64, 8, 20, 1, stream=stream0)
            del arg129_1
            del arg130_1
            del buf199
            buf210 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf204, buf205, buf206, buf210, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf206
            buf212 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_55, reshape_32, attn_output_43], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf210, (1, 2048), (2048, 1), 0), -1, arg131_1, arg131_1, arg131_1, buf197, -1, -1, buf212, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg131_1
            del buf197
            buf214 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf212, arg132_1, arg133_1, arg134_1, arg133_1, -1, -1, -1, buf214, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg132_1
            del arg133_1
            del arg134_1
            buf216 = reinterpret_tensor(buf210, (1, 2048), (2048, 1), 0); del buf210  # reuse
            # Topologically Sorted Source Nodes: [down_proj_10], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf214, -1, arg135_1, arg135_1, arg135_1, buf212, -1, -1, buf216, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg135_1
            del buf212
            del buf214
            buf218 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf219 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_15, cache_position_11], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg140_1, buf219, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_15, cache_position_11], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf216, arg136_1, arg137_1, arg138_1, arg139_1, -1, buf5, buf6, buf218, -1, arg141_1, arg142_1, buf219, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg136_1
            del arg137_1
            del arg138_1
            del arg139_1
            del buf219
            buf223 = buf205; del buf205  # reuse
            buf224 = buf204; del buf204  # reuse
            buf225 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_77, view_33, query_states_11], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf218, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg141_1, arg142_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf223, buf224, buf225, 64, 8, 20, 1, stream=stream0)
            del arg141_1
            del arg142_1
            del buf218
            buf229 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf223, buf224, buf225, buf229, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf225
            buf231 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_60, reshape_35, attn_output_47], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf229, (1, 2048), (2048, 1), 0), -1, arg143_1, arg143_1, arg143_1, buf216, -1, -1, buf231, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg143_1
            del buf216
            buf233 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf231, arg144_1, arg145_1, arg146_1, arg145_1, -1, -1, -1, buf233, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg144_1
            del arg145_1
            del arg146_1
            buf235 = reinterpret_tensor(buf229, (1, 2048), (2048, 1), 0); del buf229  # reuse
            # Topologically Sorted Source Nodes: [down_proj_11], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf233, -1, arg147_1, arg147_1, arg147_1, buf231, -1, -1, buf235, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg147_1
            del buf231
            del buf233
            buf237 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf238 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_16, cache_position_12], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg152_1, buf238, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_16, cache_position_12], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf235, arg148_1, arg149_1, arg150_1, arg151_1, -1, buf5, buf6, buf237, -1, arg153_1, arg154_1, buf238, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg148_1
            del arg149_1
            del arg150_1
            del arg151_1
            del buf238
            buf242 = buf224; del buf224  # reuse
            buf243 = buf223; del buf223  # reuse
            buf244 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_84, view_36, query_states_12], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf237, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg153_1, arg154_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf242, buf243, buf244, 64, 8, 20, 1, stream=stream0)
            del arg153_1
            del arg154_1
            del buf237
            buf248 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf242, buf243, buf244, buf248, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf244
            buf250 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_65, reshape_38, attn_output_51], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf248, (1, 2048), (2048, 1), 0), -1, arg155_1, arg155_1, arg155_1, buf235, -1, -1, buf250, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg155_1
            del buf235
            buf252 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf250, arg156_1, arg157_1, arg158_1, arg157_1, -1, -1, -1, buf252, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg156_1
            del arg157_1
            del arg158_1
            buf254 = reinterpret_tensor(buf248, (1, 2048), (2048, 1), 0); del buf248  # reuse
            # Topologically Sorted Source Nodes: [down_proj_12], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf252, -1, arg159_1, arg159_1, arg159_1, buf250, -1, -1, buf254, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg159_1
            del buf250
            del buf252
            buf256 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf257 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_17, cache_position_13], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg164_1, buf257, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_17, cache_position_13], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf254, arg160_1, arg161_1, arg162_1, arg163_1, -1, buf5, buf6, buf256, -1, arg165_1, arg166_1, buf257, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg160_1
            del arg161_1
            del arg162_1
            del arg163_1
            del buf257
            buf261 = buf243; del buf243  # reuse
            buf262 = buf242; del buf242  # reuse
            buf263 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_91, view_39, query_states_13], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf256, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg165_1, arg166_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf261, buf262, buf263, 64, 8, 20, 1, stream=stream0)
            del arg165_1
            del arg166_1
            del buf256
            buf267 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf261, buf262, buf263, buf267, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf263
            buf269 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_70, reshape_41, attn_output_55], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf267, (1, 2048), (2048, 1), 0), -1, arg167_1, arg167_1, arg167_1, buf254, -1, -1, buf269, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg167_1
            del buf254
            buf271 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf269, arg168_1, arg169_1, arg170_1, arg169_1, -1, -1, -1, buf271, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg168_1
            del arg169_1
            del arg170_1
            buf273 = reinterpret_tensor(buf267, (1, 2048), (2048, 1), 0); del buf267  # reuse
            # Topologically Sorted Source Nodes: [down_proj_13], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf271, -1, arg171_1, arg171_1, arg171_1, buf269, -1, -1, buf273, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg171_1
            del buf269
            del buf271
            buf275 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf276 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [arange_18, cache_position_14], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            triton_poi_fused_add_arange_embedding_4.run(arg176_1, buf276, 1, stream=stream0)
            # Topologically Sorted Source Nodes: [arange_18, cache_position_14], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf273, arg172_1, arg173_1, arg174_1, arg175_1, -1, buf5, buf6, buf275, -1, arg177_1, arg178_1, buf276, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg172_1
            del arg173_1
            del arg174_1
            del arg175_1
            del buf276
            buf280 = buf262; del buf262  # reuse
            buf281 = buf261; del buf261  # reuse
            buf282 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_98, view_42, query_states_14], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf275, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg177_1, arg178_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf280, buf281, buf282, 64, 8, 20, 1, stream=stream0)
            del arg177_1
            del arg178_1
            del buf275
            buf286 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf280, buf281, buf282, buf286, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf282
            buf288 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_75, reshape_44, attn_output_59], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf286, (1, 2048), (2048, 1), 0), -1, arg179_1, arg179_1, arg179_1, buf273, -1, -1, buf288, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg179_1
            del buf273
            buf290 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf288, arg180_1, arg181_1, arg182_1, arg181_1, -1, -1, -1, buf290, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg180_1
            del arg181_1
            del arg182_1
            buf292 = reinterpret_tensor(buf286, (1, 2048), (2048, 1), 0); del buf286  # reuse
            # Topologically Sorted Source Nodes: [down_proj_14], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf290, -1, arg183_1, arg183_1, arg183_1, buf288, -1, -1, buf292, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg183_1
            del buf288
            del buf290
            buf294 = empty_strided_cuda((1, 3072), (3072, 1), torch.bfloat16)
            buf295 = empty_strided_cuda((1, ), (1, ), torch.int64)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            triton_for_fused_6.run(arg3_1, arg20_1, arg32_1, arg44_1, arg56_1, arg68_1, arg80_1, arg92_1, arg104_1, arg116_1, arg128_1, arg140_1, arg152_1, arg164_1, arg176_1, arg188_1, arg3_1, arg20_1, arg32_1, arg44_1, arg56_1, arg68_1, arg80_1, arg92_1, arg104_1, arg116_1, arg128_1, arg140_1, arg152_1, arg164_1, arg176_1, buf295, arg188_1, stream=stream0)
            del arg104_1
            del arg116_1
            del arg128_1
            del arg140_1
            del arg152_1
            del arg164_1
            del arg176_1
            del arg188_1
            del arg20_1
            del arg32_1
            del arg3_1
            del arg44_1
            del arg56_1
            del arg68_1
            del arg80_1
            del arg92_1
            # Topologically Sorted Source Nodes: [arange_19, cache_position_15], Original ATen: [aten.arange, aten.add]
            stream0 = get_raw_stream(0)
            _gemv_kernel_0.run(buf292, arg184_1, arg185_1, arg186_1, arg187_1, -1, buf5, buf6, buf294, -1, arg189_1, arg190_1, buf295, 1, 2048, 2048, 512, 512, 2048, 0, 3072, 64, 1e-05, 0.0, 64, 2, 1, 1280, 64, 655360, 81920, 64, 1, 384, 1, 1, stream=stream0)
            del arg184_1
            del arg185_1
            del arg186_1
            del arg187_1
            del buf295
            del buf5
            del buf6
            buf299 = buf281; del buf281  # reuse
            buf300 = buf280; del buf280  # reuse
            buf301 = empty_strided_cuda((2560, 64), (64, 1), torch.float32)
            # Topologically Sorted Source Nodes: [linear_105, view_45, query_states_15], Original ATen: [aten._unsafe_view, aten.view, aten.transpose]
            stream0 = get_raw_stream(0)
            _decode_attention_kernel_1.run(reinterpret_tensor(buf294, (1, 32, 1, 64), (2048, 64, 64, 1), 0), arg189_1, arg190_1, reinterpret_tensor(buf12, (1, 32, 1, 1280), (1280, 0, 1280, 1), 0), 2048, 64, 64, 655360, 81920, 64, 655360, 81920, 64, 1280, 0, 1280, 1, 8, 1, 1280, 64, 64, 0.125, buf299, buf300, buf301, 64, 8, 20, 1, stream=stream0)
            del arg189_1
            del arg190_1
            del buf12
            del buf294
            buf305 = empty_strided_cuda((1, 32, 1, 64), (2048, 64, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _combine_kernel_2.run(buf299, buf300, buf301, buf305, 2048, 64, 64, 8, 1, 64, 20, 8, 4, 1, stream=stream0)
            del buf299
            del buf300
            del buf301
            buf307 = empty_strided_cuda((1, 2048), (2048, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [transpose_80, reshape_47, attn_output_63], Original ATen: [aten.transpose, aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_3.run(reinterpret_tensor(buf305, (1, 2048), (2048, 1), 0), -1, arg191_1, arg191_1, arg191_1, buf292, -1, -1, buf307, -1, -1, -1, -1, 1, 2048, 2048, 0, 0, 2048, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1024, 1, 1, stream=stream0)
            del arg191_1
            del buf292
            buf309 = empty_strided_cuda((1, 8192), (8192, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [], Original ATen: []
            stream0 = get_raw_stream(0)
            _gemv_kernel_4.run(buf307, arg192_1, arg193_1, arg194_1, arg193_1, -1, -1, -1, buf309, -1, -1, -1, -1, 1, 2048, 8192, 8192, 0, 2048, 0, 8192, 0, 1e-05, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4096, 1, 1, stream=stream0)
            del arg192_1
            del arg193_1
            del arg194_1
            buf311 = reinterpret_tensor(buf305, (1, 2048), (2048, 1), 0); del buf305  # reuse
            # Topologically Sorted Source Nodes: [down_proj_15], Original ATen: [aten.view]
            stream0 = get_raw_stream(0)
            _gemv_kernel_5.run(buf309, -1, arg195_1, arg195_1, arg195_1, buf307, -1, -1, buf311, -1, -1, -1, -1, 1, 8192, 2048, 0, 0, 8192, 2048, 2048, 0, 0.0, 0.0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 512, 1, 1, stream=stream0)
            del arg195_1
            del buf309
            buf314 = reinterpret_tensor(buf307, (1, 1, 2048), (2048, 2048, 1), 0); del buf307  # reuse
            # Topologically Sorted Source Nodes: [hidden_states_160, pow_33, variance_32, add_130, rsqrt_32, hidden_states_161, to_85, hidden_states_162], Original ATen: [aten._to_copy, aten.pow, aten.mean, aten.add, aten.rsqrt, aten.mul]
            stream0 = get_raw_stream(0)
            triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_7.run(buf311, arg196_1, buf314, 1, 2048, stream=stream0)
            del arg196_1
            del buf311
            buf315 = empty_strided_cuda((1, 128256), (128256, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [hidden_states_160, pow_33, variance_32, add_130, rsqrt_32, hidden_states_161, to_85, hidden_states_162, logits], Original ATen: [aten._to_copy, aten.pow, aten.mean, aten.add, aten.rsqrt, aten.mul, aten.view, aten.t, aten.mm]
            extern_kernels.mm(reinterpret_tensor(buf314, (1, 2048), (0, 1), 0), reinterpret_tensor(arg1_1, (2048, 128256), (1, 2048), 0), out=buf315)
            del arg1_1
            del buf314
        return (reinterpret_tensor(buf315, (1, 1, 128256), (128256, 128256, 1), 0), )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((1, 1), (1, 1), device='cuda:0', dtype=torch.int64)
    arg1_1 = rand_strided((128256, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg2_1 = rand_strided((1, 1), (1, 1), device='cuda:0', dtype=torch.int64)
    arg3_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg4_1 = rand_strided((32, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg5_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg6_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg7_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg8_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg9_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg10_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg11_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg12_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg13_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg14_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg15_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg16_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg17_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg18_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg19_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg20_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg21_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg22_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg23_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg24_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg25_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg26_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg27_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg28_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg29_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg30_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg31_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg32_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg33_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg34_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg35_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg36_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg37_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg38_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg39_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg40_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg41_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg42_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg43_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg44_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg45_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg46_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg47_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg48_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg49_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg50_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg51_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg52_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg53_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg54_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg55_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg56_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg57_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg58_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg59_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg60_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg61_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg62_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg63_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg64_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg65_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg66_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg67_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg68_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg69_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg70_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg71_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg72_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg73_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg74_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg75_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg76_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg77_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg78_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg79_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg80_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg81_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg82_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg83_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg84_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg85_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg86_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg87_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg88_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg89_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg90_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg91_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg92_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg93_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg94_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg95_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg96_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg97_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg98_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg99_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg100_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg101_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg102_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg103_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg104_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg105_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg106_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg107_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg108_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg109_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg110_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg111_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg112_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg113_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg114_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg115_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg116_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg117_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg118_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg119_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg120_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg121_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg122_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg123_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg124_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg125_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg126_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg127_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg128_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg129_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg130_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg131_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg132_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg133_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg134_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg135_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg136_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg137_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg138_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg139_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg140_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg141_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg142_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg143_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg144_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg145_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg146_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg147_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg148_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg149_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg150_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg151_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg152_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg153_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg154_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg155_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg156_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg157_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg158_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg159_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg160_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg161_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg162_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg163_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg164_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg165_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg166_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg167_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg168_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg169_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg170_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg171_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg172_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg173_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg174_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg175_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg176_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg177_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg178_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg179_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg180_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg181_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg182_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg183_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg184_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg185_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg186_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg187_1 = rand_strided((512, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg188_1 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    arg189_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg190_1 = rand_strided((1, 8, 1280, 64), (655360, 81920, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg191_1 = rand_strided((2048, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg192_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg193_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg194_1 = rand_strided((8192, 2048), (2048, 1), device='cuda:0', dtype=torch.bfloat16)
    arg195_1 = rand_strided((2048, 8192), (8192, 1), device='cuda:0', dtype=torch.bfloat16)
    arg196_1 = rand_strided((2048, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    return [arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1, arg19_1, arg20_1, arg21_1, arg22_1, arg23_1, arg24_1, arg25_1, arg26_1, arg27_1, arg28_1, arg29_1, arg30_1, arg31_1, arg32_1, arg33_1, arg34_1, arg35_1, arg36_1, arg37_1, arg38_1, arg39_1, arg40_1, arg41_1, arg42_1, arg43_1, arg44_1, arg45_1, arg46_1, arg47_1, arg48_1, arg49_1, arg50_1, arg51_1, arg52_1, arg53_1, arg54_1, arg55_1, arg56_1, arg57_1, arg58_1, arg59_1, arg60_1, arg61_1, arg62_1, arg63_1, arg64_1, arg65_1, arg66_1, arg67_1, arg68_1, arg69_1, arg70_1, arg71_1, arg72_1, arg73_1, arg74_1, arg75_1, arg76_1, arg77_1, arg78_1, arg79_1, arg80_1, arg81_1, arg82_1, arg83_1, arg84_1, arg85_1, arg86_1, arg87_1, arg88_1, arg89_1, arg90_1, arg91_1, arg92_1, arg93_1, arg94_1, arg95_1, arg96_1, arg97_1, arg98_1, arg99_1, arg100_1, arg101_1, arg102_1, arg103_1, arg104_1, arg105_1, arg106_1, arg107_1, arg108_1, arg109_1, arg110_1, arg111_1, arg112_1, arg113_1, arg114_1, arg115_1, arg116_1, arg117_1, arg118_1, arg119_1, arg120_1, arg121_1, arg122_1, arg123_1, arg124_1, arg125_1, arg126_1, arg127_1, arg128_1, arg129_1, arg130_1, arg131_1, arg132_1, arg133_1, arg134_1, arg135_1, arg136_1, arg137_1, arg138_1, arg139_1, arg140_1, arg141_1, arg142_1, arg143_1, arg144_1, arg145_1, arg146_1, arg147_1, arg148_1, arg149_1, arg150_1, arg151_1, arg152_1, arg153_1, arg154_1, arg155_1, arg156_1, arg157_1, arg158_1, arg159_1, arg160_1, arg161_1, arg162_1, arg163_1, arg164_1, arg165_1, arg166_1, arg167_1, arg168_1, arg169_1, arg170_1, arg171_1, arg172_1, arg173_1, arg174_1, arg175_1, arg176_1, arg177_1, arg178_1, arg179_1, arg180_1, arg181_1, arg182_1, arg183_1, arg184_1, arg185_1, arg186_1, arg187_1, arg188_1, arg189_1, arg190_1, arg191_1, arg192_1, arg193_1, arg194_1, arg195_1, arg196_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat)


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
