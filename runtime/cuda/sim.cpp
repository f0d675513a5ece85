/* The simulation build's device memory: every allocation is its own
 * anonymous mapping, PROT_NONE except while a simulated kernel runs or the
 * runtime copies to or from it (rt_sim_open .. rt_sim_close), so host code
 * that reads device memory (a fused loop dereferencing x->data, a runtime
 * function that forgot to stage) crashes in CI as it would fault on a GPU.
 * Only in libspmdrt_cudasim. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "dev.h"

namespace {
struct mapping {
    void *p;
    size_t len;
};
mapping *maps;
size_t nmaps, capmaps;
int depth; /* open launches and copies */

size_t page_round(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return n == 0 ? pg : (n + pg - 1) / pg * pg;
}

void protect_all(int prot)
{
    for (size_t i = 0; i < nmaps; i++)
        if (mprotect(maps[i].p, maps[i].len, prot) != 0) {
            perror("spmd: simulated device: mprotect");
            abort();
        }
}
} // namespace

extern "C" {

void *rt_sim_map(size_t bytes)
{
    size_t len = page_round(bytes);
    void *p = mmap(NULL, len, depth > 0 ? PROT_READ | PROT_WRITE : PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (nmaps == capmaps) {
        size_t nc = capmaps ? 2 * capmaps : 64;
        mapping *m = (mapping *)realloc(maps, nc * sizeof *m);
        if (!m) {
            munmap(p, len);
            return NULL;
        }
        maps = m;
        capmaps = nc;
    }
    maps[nmaps].p = p;
    maps[nmaps].len = len;
    nmaps++;
    return p;
}

void rt_sim_unmap(void *p, size_t bytes)
{
    (void)bytes;
    for (size_t i = nmaps; i-- > 0;)
        if (maps[i].p == p) {
            munmap(p, maps[i].len);
            maps[i] = maps[--nmaps];
            return;
        }
    fprintf(stderr, "spmd: simulated device: freeing %p, which is not device memory\n", p);
    abort();
}

void rt_sim_open(void)
{
    if (depth++ == 0)
        protect_all(PROT_READ | PROT_WRITE);
}

void rt_sim_close(void)
{
    if (--depth == 0)
        protect_all(PROT_NONE);
}

/* ---- graphs: a capture records the launches, GEMMs, copies and
 * collectives of the host code it runs (dev.h's rt_launch, target.cu's
 * copies) instead of running them, as cudaStreamBeginCapture does; a replay
 * runs the recording, not the host code. Device memory stays closed during
 * a capture: host code that reads it faults, and graph.c stops on any
 * synchronisation or copy to or from the host (rt_graph_host_sync). */
struct sim_graph {
    std::vector<std::function<void()>> ops;
};
static sim_graph *capturing_now;

bool rt_sim_capturing(void) { return capturing_now != nullptr; }

void rt_sim_capture_begin(void)
{
    if (capturing_now) {
        fprintf(stderr, "spmd: simulated device: a capture inside a capture\n");
        abort();
    }
    capturing_now = new sim_graph;
}

void *rt_sim_capture_end(void)
{
    sim_graph *g = capturing_now;
    capturing_now = nullptr;
    return g;
}

void rt_sim_graph_launch(void *g)
{
    for (auto &op : static_cast<sim_graph *>(g)->ops)
        op();
}

void rt_sim_graph_free(void *g) { delete static_cast<sim_graph *>(g); }

long rt_sim_graph_nodes(void *g) { return (long)static_cast<sim_graph *>(g)->ops.size(); }

/* spmdrt_kernels.h: a generated kernel's launch during a capture (its
 * closure, arg, deleted with del when the graph is) */
int rt_sim_record_c(void (*run)(void *), void *arg, void (*del)(void *))
{
    if (!capturing_now)
        return 0;
    std::shared_ptr<void> a(arg, del);
    capturing_now->ops.push_back([run, a]() { run(a.get()); });
    return 1;
}

} /* extern "C" */

void rt_sim_record(std::function<void()> op)
{
    capturing_now->ops.push_back(std::move(op));
}
