"""Compiled lookup of the contact entry of body pairs (mbsim.model.contact.pairs.ContactPairs.entry),
shared by the Python entry and the compiled broad phase."""

import numpy as np

from libc.stdint cimport int64_t


cdef int64_t entry_of(int64_t a, int64_t b, const int64_t* keys, const int64_t* key_entry, Py_ssize_t nkeys,
                      const int64_t* set_index, const unsigned char* set_in1, const unsigned char* set_in2,
                      Py_ssize_t nsets, int64_t nbody) noexcept nogil:
    cdef int64_t out = -1, key
    cdef Py_ssize_t lo = 0, hi = nkeys, mid, s, n1 = nbody + 1
    if a == b:
        return -1
    # the listed pairs: binary search of the key
    key = a * n1 + b if a < b else b * n1 + a
    while lo < hi:
        mid = (lo + hi) // 2
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    if lo < nkeys and keys[lo] == key:
        out = key_entry[lo]
    # the large entries, in scene order: the later one wins
    for s in range(nsets):
        if ((set_in1[s * n1 + a] and set_in2[s * n1 + b]) or (set_in2[s * n1 + a] and set_in1[s * n1 + b])) \
                and set_index[s] > out:
            out = set_index[s]
    return out


def entries(const int64_t[::1] body_a, const int64_t[::1] body_b, const int64_t[::1] keys,
            const int64_t[::1] key_entry, const int64_t[::1] set_index, const unsigned char[:, ::1] set_in1,
            const unsigned char[:, ::1] set_in2, int64_t nbody):
    """``entry_of`` of each pair (body_a[r], body_b[r]): (k,) int64."""
    cdef Py_ssize_t k = body_a.shape[0], r
    out = np.empty(k, dtype=np.int64)
    cdef int64_t[::1] out_v = out
    cdef int64_t zero = 0
    cdef const int64_t* kp = &keys[0] if keys.shape[0] else &zero
    cdef const int64_t* ep = &key_entry[0] if key_entry.shape[0] else &zero
    cdef const int64_t* sp = &set_index[0] if set_index.shape[0] else &zero
    cdef const unsigned char* in1 = &set_in1[0, 0] if set_in1.shape[0] else NULL
    cdef const unsigned char* in2 = &set_in2[0, 0] if set_in2.shape[0] else NULL
    with nogil:
        for r in range(k):
            out_v[r] = entry_of(body_a[r], body_b[r], kp, ep, keys.shape[0], sp, in1, in2, set_index.shape[0], nbody)
    return out
