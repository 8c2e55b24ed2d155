/* hpcvirt commprof: a small PMPI communication profiler (in the spirit of IPM).
 *
 * Loaded into an MPI program with LD_PRELOAD, it times every call of the MPI
 * functions the NAS Parallel Benchmarks use and counts the bytes each rank
 * sends to each other rank.  At MPI_Finalize rank 0 gathers every rank's
 * counters and prints one block on its standard output:
 *
 *   hpcvirt-commprof: begin 1 ranks <P>
 *   hpcvirt-commprof: rank <r> wall <s> mpi <s>
 *   hpcvirt-commprof: fn <r> <function> <calls> <seconds> <bytes>
 *   hpcvirt-commprof: peer <src> <dst> <p2p bytes> <p2p messages> <alltoall bytes>
 *   hpcvirt-commprof: end
 *
 * wall = time from MPI_Init to MPI_Finalize; mpi = time inside the wrapped
 * calls.  Ranks are MPI_COMM_WORLD ranks.  Bytes are payload bytes
 * (count x type size) of point-to-point sends and, for MPI_Alltoall(v), the
 * block each rank sends to each other rank; the other collectives count
 * their payload under their function only (their traffic by peer depends on
 * the MPI's algorithm).
 *
 * Both language bindings are wrapped: Open MPI's Fortran bindings call the
 * PMPI_ C functions directly, so a C-only PMPI tool would not see the
 * Fortran kernels.  This file is therefore specific to Open MPI (it refuses
 * to compile with another MPI).
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef OPEN_MPI
#error "commprof wraps Open MPI's Fortran bindings; build it with Open MPI's mpicc"
#endif

enum { F_SEND, F_ISEND, F_RECV, F_IRECV, F_WAIT, F_WAITALL, F_SENDRECV, F_BARRIER, F_BCAST,
       F_REDUCE, F_ALLREDUCE, F_ALLTOALL, F_ALLTOALLV, NF };
static const char *fn_name[NF] = {"MPI_Send", "MPI_Isend", "MPI_Recv", "MPI_Irecv", "MPI_Wait",
                                  "MPI_Waitall", "MPI_Sendrecv", "MPI_Barrier", "MPI_Bcast",
                                  "MPI_Reduce", "MPI_Allreduce", "MPI_Alltoall", "MPI_Alltoallv"};

static double t_init = -1.0;
static int world_rank = 0, world_size = 0, reported = 0;
static double fn_calls[NF], fn_time[NF], fn_bytes[NF];
static double *peer; /* world_size x 3: p2p bytes, p2p messages, alltoall bytes */

/* world rank of rank r of comm (a small cache of translated communicators) */
#define NCACHE 16
static struct { MPI_Comm comm; int size; int *world; } cache[NCACHE];
static int ncache = 0;

static int to_world(MPI_Comm comm, int r) {
    if (r < 0 || comm == MPI_COMM_WORLD) return r;
    for (int i = 0; i < ncache; i++)
        if (cache[i].comm == comm) return r < cache[i].size ? cache[i].world[r] : -1;
    MPI_Group g, wg;
    int n;
    PMPI_Comm_size(comm, &n);
    PMPI_Comm_group(comm, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    int *mine = malloc(sizeof(int) * (size_t)n), *world = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) mine[i] = i;
    PMPI_Group_translate_ranks(g, n, mine, wg, world);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    free(mine);
    int out = r < n ? world[r] : -1;
    if (ncache < NCACHE) {
        cache[ncache].comm = comm;
        cache[ncache].size = n;
        cache[ncache].world = world;
        ncache++;
    } else {
        free(world);
    }
    return out;
}

static double bytes_of(int count, MPI_Datatype t) {
    int size = 0;
    if (t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &size) != MPI_SUCCESS) return 0.0;
    return (double)count * (double)size;
}

static void start(void) {
    if (t_init >= 0.0) return;
    t_init = PMPI_Wtime();
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    peer = calloc((size_t)world_size * 3, sizeof(double));
}

static void sent(MPI_Comm comm, int dest, double bytes) {
    int w = to_world(comm, dest);
    if (peer && w >= 0 && w < world_size) {
        peer[3 * w] += bytes;
        peer[3 * w + 1] += 1.0;
    }
}

static void a2a(MPI_Comm comm, const int *counts, int count, MPI_Datatype t) {
    int n;
    PMPI_Comm_size(comm, &n);
    for (int r = 0; r < n; r++) {
        int w = to_world(comm, r);
        if (peer && w >= 0 && w < world_size && w != world_rank)
            peer[3 * w + 2] += bytes_of(counts ? counts[r] : count, t);
    }
}

static void report(void) {
    if (reported || t_init < 0.0) return;
    reported = 1;
    double wall = PMPI_Wtime() - t_init, mpi = 0.0;
    for (int f = 0; f < NF; f++) mpi += fn_time[f];
    int per = 2 + 3 * NF + 3 * world_size;
    double *mine = calloc((size_t)per, sizeof(double)), *all = NULL;
    mine[0] = wall;
    mine[1] = mpi;
    for (int f = 0; f < NF; f++) {
        mine[2 + 3 * f] = fn_calls[f];
        mine[3 + 3 * f] = fn_time[f];
        mine[4 + 3 * f] = fn_bytes[f];
    }
    memcpy(mine + 2 + 3 * NF, peer, sizeof(double) * 3 * (size_t)world_size);
    if (world_rank == 0) all = malloc(sizeof(double) * (size_t)per * (size_t)world_size);
    PMPI_Gather(mine, per, MPI_DOUBLE, all, per, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (world_rank == 0) {
        printf("hpcvirt-commprof: begin 1 ranks %d\n", world_size);
        for (int r = 0; r < world_size; r++) {
            const double *v = all + (size_t)r * (size_t)per;
            printf("hpcvirt-commprof: rank %d wall %.6f mpi %.6f\n", r, v[0], v[1]);
            for (int f = 0; f < NF; f++)
                if (v[2 + 3 * f] > 0)
                    printf("hpcvirt-commprof: fn %d %s %.0f %.6f %.0f\n", r, fn_name[f], v[2 + 3 * f],
                           v[3 + 3 * f], v[4 + 3 * f]);
            const double *p = v + 2 + 3 * NF;
            for (int d = 0; d < world_size; d++)
                if (p[3 * d] > 0 || p[3 * d + 2] > 0)
                    printf("hpcvirt-commprof: peer %d %d %.0f %.0f %.0f\n", r, d, p[3 * d], p[3 * d + 1],
                           p[3 * d + 2]);
        }
        printf("hpcvirt-commprof: end\n");
        fflush(stdout);
        free(all);
    }
    free(mine);
}

#define TIMED(f, bytes, call)                  \
    do {                                       \
        double t0_ = PMPI_Wtime();             \
        int rc_ = (call);                      \
        fn_time[f] += PMPI_Wtime() - t0_;      \
        fn_calls[f] += 1.0;                    \
        fn_bytes[f] += (bytes);                \
        return rc_;                            \
    } while (0)

/* ------------------------------------------------------------------ C */
int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    start();
    return rc;
}
int MPI_Init_thread(int *argc, char ***argv, int req, int *prov) {
    int rc = PMPI_Init_thread(argc, argv, req, prov);
    start();
    return rc;
}
int MPI_Finalize(void) {
    report();
    return PMPI_Finalize();
}
int MPI_Send(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
    sent(c, dest, bytes_of(n, t));
    TIMED(F_SEND, bytes_of(n, t), PMPI_Send(b, n, t, dest, tag, c));
}
int MPI_Isend(const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c, MPI_Request *q) {
    sent(c, dest, bytes_of(n, t));
    TIMED(F_ISEND, bytes_of(n, t), PMPI_Isend(b, n, t, dest, tag, c, q));
}
int MPI_Recv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status *s) {
    TIMED(F_RECV, 0.0, PMPI_Recv(b, n, t, src, tag, c, s));
}
int MPI_Irecv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *q) {
    TIMED(F_IRECV, 0.0, PMPI_Irecv(b, n, t, src, tag, c, q));
}
int MPI_Wait(MPI_Request *q, MPI_Status *s) { TIMED(F_WAIT, 0.0, PMPI_Wait(q, s)); }
int MPI_Waitall(int n, MPI_Request q[], MPI_Status s[]) { TIMED(F_WAITALL, 0.0, PMPI_Waitall(n, q, s)); }
int MPI_Sendrecv(const void *sb, int sn, MPI_Datatype st, int dest, int stag, void *rb, int rn, MPI_Datatype rt,
                 int src, int rtag, MPI_Comm c, MPI_Status *s) {
    sent(c, dest, bytes_of(sn, st));
    TIMED(F_SENDRECV, bytes_of(sn, st), PMPI_Sendrecv(sb, sn, st, dest, stag, rb, rn, rt, src, rtag, c, s));
}
int MPI_Barrier(MPI_Comm c) { TIMED(F_BARRIER, 0.0, PMPI_Barrier(c)); }
int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c) {
    TIMED(F_BCAST, bytes_of(n, t), PMPI_Bcast(b, n, t, root, c));
}
int MPI_Reduce(const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
    TIMED(F_REDUCE, bytes_of(n, t), PMPI_Reduce(sb, rb, n, t, op, root, c));
}
int MPI_Allreduce(const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
    TIMED(F_ALLREDUCE, bytes_of(n, t), PMPI_Allreduce(sb, rb, n, t, op, c));
}
int MPI_Alltoall(const void *sb, int sn, MPI_Datatype st, void *rb, int rn, MPI_Datatype rt, MPI_Comm c) {
    a2a(c, NULL, sn, st);
    TIMED(F_ALLTOALL, 0.0, PMPI_Alltoall(sb, sn, st, rb, rn, rt, c));
}
int MPI_Alltoallv(const void *sb, const int sn[], const int sd[], MPI_Datatype st, void *rb, const int rn[],
                  const int rd[], MPI_Datatype rt, MPI_Comm c) {
    a2a(c, sn, 0, st);
    TIMED(F_ALLTOALLV, 0.0, PMPI_Alltoallv(sb, sn, sd, st, rb, rn, rd, rt, c));
}

/* ------------------------------------------------------------ Fortran
 * gfortran's names (lower case, one trailing underscore); every argument by
 * reference; handles are MPI_Fint.  Each wrapper calls Open MPI's pmpi_*_. */
typedef MPI_Fint F;
#define FT(x) MPI_Type_f2c(*(x))
#define FC(x) MPI_Comm_f2c(*(x))
void pmpi_init_(F *);
void pmpi_finalize_(F *);
void pmpi_send_(void *, F *, F *, F *, F *, F *, F *);
void pmpi_isend_(void *, F *, F *, F *, F *, F *, F *, F *);
void pmpi_recv_(void *, F *, F *, F *, F *, F *, F *, F *);
void pmpi_irecv_(void *, F *, F *, F *, F *, F *, F *, F *);
void pmpi_wait_(F *, F *, F *);
void pmpi_waitall_(F *, F *, F *, F *);
void pmpi_barrier_(F *, F *);
void pmpi_bcast_(void *, F *, F *, F *, F *, F *);
void pmpi_reduce_(void *, void *, F *, F *, F *, F *, F *, F *);
void pmpi_allreduce_(void *, void *, F *, F *, F *, F *, F *);
void pmpi_alltoall_(void *, F *, F *, void *, F *, F *, F *, F *);
void pmpi_alltoallv_(void *, F *, F *, F *, void *, F *, F *, F *, F *, F *);

#define FTIMED(f, bytes, call)              \
    do {                                    \
        double t0_ = PMPI_Wtime();          \
        call;                               \
        fn_time[f] += PMPI_Wtime() - t0_;   \
        fn_calls[f] += 1.0;                 \
        fn_bytes[f] += (bytes);             \
    } while (0)

void mpi_init_(F *ierr) {
    pmpi_init_(ierr);
    start();
}
void mpi_finalize_(F *ierr) {
    report();
    pmpi_finalize_(ierr);
}
void mpi_send_(void *b, F *n, F *t, F *dest, F *tag, F *c, F *ierr) {
    double by = bytes_of(*n, FT(t));
    sent(FC(c), *dest, by);
    FTIMED(F_SEND, by, pmpi_send_(b, n, t, dest, tag, c, ierr));
}
void mpi_isend_(void *b, F *n, F *t, F *dest, F *tag, F *c, F *q, F *ierr) {
    double by = bytes_of(*n, FT(t));
    sent(FC(c), *dest, by);
    FTIMED(F_ISEND, by, pmpi_isend_(b, n, t, dest, tag, c, q, ierr));
}
void mpi_recv_(void *b, F *n, F *t, F *src, F *tag, F *c, F *s, F *ierr) {
    FTIMED(F_RECV, 0.0, pmpi_recv_(b, n, t, src, tag, c, s, ierr));
}
void mpi_irecv_(void *b, F *n, F *t, F *src, F *tag, F *c, F *q, F *ierr) {
    FTIMED(F_IRECV, 0.0, pmpi_irecv_(b, n, t, src, tag, c, q, ierr));
}
void mpi_wait_(F *q, F *s, F *ierr) { FTIMED(F_WAIT, 0.0, pmpi_wait_(q, s, ierr)); }
void mpi_waitall_(F *n, F *q, F *s, F *ierr) { FTIMED(F_WAITALL, 0.0, pmpi_waitall_(n, q, s, ierr)); }
void mpi_barrier_(F *c, F *ierr) { FTIMED(F_BARRIER, 0.0, pmpi_barrier_(c, ierr)); }
void mpi_bcast_(void *b, F *n, F *t, F *root, F *c, F *ierr) {
    FTIMED(F_BCAST, bytes_of(*n, FT(t)), pmpi_bcast_(b, n, t, root, c, ierr));
}
void mpi_reduce_(void *sb, void *rb, F *n, F *t, F *op, F *root, F *c, F *ierr) {
    FTIMED(F_REDUCE, bytes_of(*n, FT(t)), pmpi_reduce_(sb, rb, n, t, op, root, c, ierr));
}
void mpi_allreduce_(void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr) {
    FTIMED(F_ALLREDUCE, bytes_of(*n, FT(t)), pmpi_allreduce_(sb, rb, n, t, op, c, ierr));
}
void mpi_alltoall_(void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *ierr) {
    a2a(FC(c), NULL, *sn, FT(st));
    FTIMED(F_ALLTOALL, 0.0, pmpi_alltoall_(sb, sn, st, rb, rn, rt, c, ierr));
}
void mpi_alltoallv_(void *sb, F *sn, F *sd, F *st, void *rb, F *rn, F *rd, F *rt, F *c, F *ierr) {
    int n;
    PMPI_Comm_size(FC(c), &n);
    int *counts = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) counts[i] = (int)sn[i];
    a2a(FC(c), counts, 0, FT(st));
    free(counts);
    FTIMED(F_ALLTOALLV, 0.0, pmpi_alltoallv_(sb, sn, sd, st, rb, rn, rd, rt, c, ierr));
}
