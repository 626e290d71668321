"""The dynamics algorithms, each written once for one state and a batch-last chunk: RNEA,
CRBA, ABA (and its factorization), M^-1, Carpentier-Mansard derivatives, energy and
momentum, operational-space inertia, and the O(n) methods of the literature (Saha's UDU^T,
Rodriguez and Kreutz's operators, Yamane and Nakamura's virtual work).  Their public,
batchable forms are in :mod:`jaxdyn.batching`."""
