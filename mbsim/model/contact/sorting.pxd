# A stable argsort for the compiled contact stages (the broad phase's sweep, the timestepping
# step's warm-start keys): one merge sort over double or int64 keys, inlined where it is used.

from libc.stdint cimport int64_t

ctypedef fused sort_key:
    double
    int64_t


# Stable merge sort of idx[0:n] by key[idx * stride] (ties keep their order, as numpy's
# kind="stable"); tmp: n entries of scratch.
cdef inline void argsort(const sort_key* key, Py_ssize_t stride, int64_t* idx, int64_t* tmp,
                         Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t width = 1, lo, mid, hi, i, j, k
    cdef int64_t* src = idx
    cdef int64_t* dst = tmp
    cdef int64_t* swap
    # bottom-up: merge runs of width 1, 2, 4, ... alternating between the two buffers
    while width < n:
        lo = 0
        while lo < n:
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                if key[src[j] * stride] < key[src[i] * stride]:
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
            lo += 2 * width
        swap = src
        src = dst
        dst = swap
        width *= 2
    if src != idx:
        for i in range(n):
            idx[i] = src[i]
