#!/usr/bin/python3
"""Writes the NumPy-made seed files of fuzz/corpus/parse_matrix (run from that folder).

Files NumPy itself writes (every dtype attnrank reads, both orders, both byte
orders, format version 3, a 4-D array, a 1-D one), a safetensors file, and text
as np.savetxt and pandas write it. Fixed seed, so the corpus is reproducible.
"""
import json
import struct

import numpy as np

rng = np.random.default_rng(7)
A = rng.random((3, 3))
A /= A.sum(1, keepdims=True)
np.save('attention-f64.npy', A)
np.save('attention-f32-fortran.npy', np.asfortranarray(A.astype(np.float32)))
np.save('attention-f16.npy', A.astype(np.float16))
np.save('big-endian-f8.npy', A.astype('>f8'))
np.save('int8.npy', np.array([[1, -2], [3, -128]], dtype=np.int8))
np.save('uint64.npy', np.array([[2**64 - 1, 0]], dtype=np.uint64))
np.save('bool.npy', np.eye(2, dtype=bool))
np.save('heads-4d.npy', rng.random((1, 2, 2, 2)))
np.save('vector.npy', np.arange(3.0))
np.save('nan.npy', np.array([[1.0, np.nan]]))
np.save('complex.npy', np.array([[1j]]))
with open('version3.npy', 'wb') as f:
    np.lib.format.write_array(f, A, version=(3, 0))


def safetensors(tensors):
    header, data = {}, b''
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    return struct.pack('<Q', len(h)) + h + data


with open('weights.safetensors', 'wb') as f:
    f.write(safetensors({'w': ('F32', [2, 2], np.array([[1, 2], [3, 4]], dtype='<f4').tobytes()),
                         'b': ('BF16', [2], b'\x80\x3f\x00\x40')}))
np.savetxt('savetxt-default.txt', A)
np.savetxt('savetxt-tab.tsv', A, delimiter='\t')
with open('pandas-index.csv', 'w') as f:
    f.write(',0,1\n0,0.25,0.75\n1,0.5,0.5\n')
with open('semicolon-decimal-comma.csv', 'w') as f:
    f.write('0,5;0,5\n0,25;0,75\n')
