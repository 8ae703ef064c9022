# Compiled lookup of the contact entry of a body pair (mbsim.model.contact.pairs.ContactPairs), for
# the compiled broad phase.

from libc.stdint cimport int64_t


# The entry of model.contacts governing bodies a and b (extended indices, ground = nbody), -1 where
# none: the listed pair keys (sorted, lo * (nbody+1) + hi) first, then the large entries' masks in
# scene order (set_in1, set_in2: (nsets, nbody+1)), the later entry winning.
cdef int64_t entry_of(int64_t a, int64_t b, const int64_t* keys, const int64_t* key_entry, Py_ssize_t nkeys,
                      const int64_t* set_index, const unsigned char* set_in1, const unsigned char* set_in2,
                      Py_ssize_t nsets, int64_t nbody) noexcept nogil
