/*
 * hpcvirt-advect: a 3-D advection-diffusion stencil with a 1-D domain
 * decomposition along z (a chain of ranks, like the 1x1xP decompositions of
 * Nanos et al.), for the process-placement experiment.
 *
 *   advect [-x NX] [-y NY] [-z NZ_PER_RANK] [-s STEPS] [-w WARMUP] [-n]
 *
 * Each step every rank exchanges one halo plane (NX*NY doubles) with each
 * neighbour (rank-1, rank+1; the chain is not periodic) and then updates its
 * cells with a 7-point upwind-advection + diffusion stencil.  Communication
 * and computation are timed separately; WARMUP steps run first, untimed.
 *
 * Every rank names its node by hostname and network namespace (two network
 * namespaces on one host are two nodes; so are two guests), and the program
 * counts how many of its messages go to a rank on another node: the share of
 * messages that cross the network, measured rather than assumed.
 *
 * Verification: the field after WARMUP+STEPS steps does not depend on the
 * number of ranks (every cell sees the same operands in the same order).  Its
 * checksum is the sum of the cells' IEEE-754 bit patterns modulo 2^64, which
 * is independent of the summation order.  Unless -n is given, rank 0 then
 * recomputes the whole domain serially (outside the timed region) and
 * prints "verification SUCCESSFUL" only if both checksums are equal.
 *
 * Output (rank 0, one "key value..." per line) ends with "end"; anything
 * missing means the run did not complete.
 */
#include <mpi.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FORMAT_VERSION 1
#define NODE_LEN 256

/* advection (upwind, positive velocity) + diffusion coefficients per axis */
static const double CX = 0.10, CY = 0.10, CZ = 0.20, D = 0.05;

typedef struct {
    int nx, ny, nz;      /* nz = planes owned by this rank */
    int z0;              /* global index of the first owned plane */
    double *u, *v;       /* (nz + 2) planes; plane 0 and nz + 1 are halos */
} Field;

static size_t idx(const Field *f, int x, int y, int z) {
    return ((size_t)z * f->ny + y) * f->nx + x;
}

static double initial(int x, int y, int z, int nx, int ny, int nzg) {
    /* a smooth bump, deterministic and exactly representable inputs */
    double a = (double)x / nx - 0.3, b = (double)y / ny - 0.4, c = (double)z / nzg - 0.25;
    double r2 = a * a + b * b + c * c;
    return r2 < 0.04 ? 1.0 - 25.0 * r2 : 0.0;
}

static void init_field(Field *f, int nzg) {
    size_t plane = (size_t)f->nx * f->ny;
    f->u = calloc(plane * (f->nz + 2), sizeof(double));
    f->v = calloc(plane * (f->nz + 2), sizeof(double));
    if (!f->u || !f->v) {
        fprintf(stderr, "advect: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int z = 1; z <= f->nz; z++)
        for (int y = 0; y < f->ny; y++)
            for (int x = 0; x < f->nx; x++)
                f->u[idx(f, x, y, z)] = initial(x, y, f->z0 + z - 1, f->nx, f->ny, nzg);
}

/* one stencil update of the owned planes; halos must be current */
static void update(Field *f) {
    const int nx = f->nx, ny = f->ny;
    for (int z = 1; z <= f->nz; z++)
        for (int y = 0; y < ny; y++) {
            int ym = (y + ny - 1) % ny, yp = (y + 1) % ny;
            for (int x = 0; x < nx; x++) {
                int xm = (x + nx - 1) % nx, xp = (x + 1) % nx;
                double c = f->u[idx(f, x, y, z)];
                double xl = f->u[idx(f, xm, y, z)], xr = f->u[idx(f, xp, y, z)];
                double yl = f->u[idx(f, x, ym, z)], yr = f->u[idx(f, x, yp, z)];
                double zl = f->u[idx(f, x, y, z - 1)], zr = f->u[idx(f, x, y, z + 1)];
                f->v[idx(f, x, y, z)] = c + (CX + D) * (xl - c) + D * (xr - c)
                                          + (CY + D) * (yl - c) + D * (yr - c)
                                          + (CZ + D) * (zl - c) + D * (zr - c);
            }
        }
    double *t = f->u; f->u = f->v; f->v = t;
}

static uint64_t checksum(const Field *f) {
    uint64_t s = 0;
    for (int z = 1; z <= f->nz; z++)
        for (int y = 0; y < f->ny; y++)
            for (int x = 0; x < f->nx; x++) {
                uint64_t bits;
                double d = f->u[idx(f, x, y, z)];
                memcpy(&bits, &d, sizeof bits);
                s += bits;
            }
    return s;
}

/* exchange halo planes with the chain neighbours; counts messages sent */
static void exchange(Field *f, int rank, int size, long *sent, long *crossing, const int *remote) {
    size_t plane = (size_t)f->nx * f->ny;
    MPI_Request req[4];
    MPI_Status st[4];
    int n = 0;
    if (rank > 0) {
        MPI_Irecv(f->u, (int)plane, MPI_DOUBLE, rank - 1, 1, MPI_COMM_WORLD, &req[n++]);
        MPI_Isend(f->u + plane, (int)plane, MPI_DOUBLE, rank - 1, 0, MPI_COMM_WORLD, &req[n++]);
        (*sent)++;
        *crossing += remote[rank - 1];
    }
#ifdef ADVECT_FAULT_STALE_HALO
    double *upper = f->v;   /* fault injection for the tests: the upper halo goes stale */
#else
    double *upper = f->u;
#endif
    if (rank < size - 1) {
        MPI_Irecv(upper + plane * (f->nz + 1), (int)plane, MPI_DOUBLE, rank + 1, 0, MPI_COMM_WORLD, &req[n++]);
        MPI_Isend(f->u + plane * f->nz, (int)plane, MPI_DOUBLE, rank + 1, 1, MPI_COMM_WORLD, &req[n++]);
        (*sent)++;
        *crossing += remote[rank + 1];
    }
    MPI_Waitall(n, req, st);
}

static void node_name(char *out) {
    char host[128] = "?", ns[96] = "?";
    gethostname(host, sizeof host - 1);
    ssize_t k = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    ns[k > 0 ? k : 1] = '\0';
    snprintf(out, NODE_LEN, "%s/%s", host, ns);
}

static int arg_int(const char *s, const char *what) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 1 || v > 100000000) {
        fprintf(stderr, "advect: %s must be a positive integer, got '%s'\n", what, s);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return (int)v;
}

int main(int argc, char **argv) {
    int nx = 32, ny = 32, nzl = 16, steps = 200, warmup = 10, verify = 1;
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int opt;
    while ((opt = getopt(argc, argv, "x:y:z:s:w:n")) != -1) {
        switch (opt) {
        case 'x': nx = arg_int(optarg, "-x"); break;
        case 'y': ny = arg_int(optarg, "-y"); break;
        case 'z': nzl = arg_int(optarg, "-z"); break;
        case 's': steps = arg_int(optarg, "-s"); break;
        case 'w': warmup = atoi(optarg); break;
        case 'n': verify = 0; break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: advect [-x NX] [-y NY] [-z NZ_PER_RANK] [-s STEPS] [-w WARMUP] [-n]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    const int nzg = nzl * size;

    /* who is where: one node name per rank */
    char me[NODE_LEN] = {0};
    node_name(me);
    char *all = calloc((size_t)size, NODE_LEN);
    int *remote = calloc((size_t)size, sizeof(int));
    MPI_Allgather(me, NODE_LEN, MPI_CHAR, all, NODE_LEN, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++) remote[r] = strcmp(all + (size_t)r * NODE_LEN, me) != 0;

    Field f = {nx, ny, nzl, rank * nzl, NULL, NULL};
    init_field(&f, nzg);

    long sent = 0, crossing = 0, wsent = 0, wcross = 0;
    for (int s = 0; s < warmup; s++) {
        exchange(&f, rank, size, &wsent, &wcross, remote);
        update(&f);
    }
    double t_comm = 0.0, t_comp = 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int s = 0; s < steps; s++) {
        double a = MPI_Wtime();
        exchange(&f, rank, size, &sent, &crossing, remote);
        double b = MPI_Wtime();
        update(&f);
        t_comm += b - a;
        t_comp += MPI_Wtime() - b;
    }
    double t_total = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);

    double mine[3] = {t_total, t_comp, t_comm}, mx[3], sum[3];
    MPI_Reduce(mine, mx, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(mine, sum, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    long counts[2] = {sent, crossing}, tot[2];
    MPI_Reduce(counts, tot, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    uint64_t cs = checksum(&f), cs_all = 0;
    MPI_Reduce(&cs, &cs_all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        printf("hpcvirt-advect %d\n", FORMAT_VERSION);
        printf("ranks %d\n", size);
        printf("grid %d %d %d\n", nx, ny, nzg);
        printf("steps %d\n", steps);
        printf("warmup %d\n", warmup);
        printf("halo_bytes %zu\n", (size_t)nx * ny * sizeof(double));
        for (int r = 0; r < size; r++) printf("node %d %s\n", r, all + (size_t)r * NODE_LEN);
        printf("messages %ld\n", tot[0]);
        printf("messages_network %ld\n", tot[1]);
        printf("time_total_s %.9f\n", mx[0]);
        printf("time_compute_s %.9f %.9f\n", mx[1], sum[1] / size);
        printf("time_comm_s %.9f %.9f\n", mx[2], sum[2] / size);
        printf("checksum %016" PRIx64 "\n", cs_all);
        fflush(stdout);
        if (verify) {
            Field g = {nx, ny, nzg, 0, NULL, NULL};
            init_field(&g, nzg);
            size_t plane = (size_t)nx * ny;
            for (int s = 0; s < warmup + steps; s++) {
                /* non-periodic z: the outer halos stay zero */
                memset(g.u, 0, plane * sizeof(double));
                memset(g.u + plane * (nzg + 1), 0, plane * sizeof(double));
                update(&g);
            }
            uint64_t ref = checksum(&g);
            printf("reference %016" PRIx64 "\n", ref);
            printf("verification %s\n", ref == cs_all ? "SUCCESSFUL" : "FAILED");
            free(g.u); free(g.v);
        } else {
            printf("verification SKIPPED\n");
        }
        printf("end\n");
        fflush(stdout);
    }
    free(f.u); free(f.v); free(all); free(remote);
    MPI_Finalize();
    return 0;
}
