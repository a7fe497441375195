// train_mlp — data-parallel training of a small MLP, the bundled workload for libhier.
//
// An unmodified MPI program (C API only) of the kind libhier is preloaded into: every step it
// moves one large float gradient buffer, so with a wide enough model the collectives are
// bandwidth bound and a hierarchical schedule shows.
//
//   --overlap 1  (ddp) one MPI_Iallreduce per layer, started as soon as backward has that
//                layer's gradients, all waited (MPI_Waitall) before the update
//   --mode ddp   gradients summed with MPI_Allreduce (in place, one flat MPI_FLOAT buffer,
//                MPI_SUM), divided by the world size; every rank updates all parameters.
//   --mode zero  parameters sharded (ZeRO-style): MPI_Allgather of the shards before the
//                forward pass, MPI_Reduce_scatter_block of the gradients after backward, each
//                rank updates only its shard.
//
// Model: in -> width (tanh) -> width (tanh) -> out, float32, plain SGD, MSE against a fixed
// random "teacher" function. Data are synthetic and deterministic: sample n of the global
// batch of step s is a pure function of (seed, s, n), and rank r takes samples
// [r*batch, (r+1)*batch) of each global batch. Parameters: width^2 + (in+out+2)*width + out
// floats, e.g. --width 2048 gives 4.3 M parameters = 17 MiB of gradients per step.
//
// Exact sums (default, --exact-sum 1): every rank rounds its local gradients to a grid of
// 2^-k (k = 24 - ceil(log2 P)) after clipping each to [-1, 1]. Sums of up to P such values are
// exact in float32, so the reduced gradient is bit-identical whatever order or algorithm the
// MPI (or libhier) reduces in. Runs with and without libhier, and ddp vs zero, therefore
// print the same final_loss to the last bit; any wrong reduction shows. --exact-sum 0 trains
// on raw float gradients (results then agree only within rounding across reduction orders).
//
// Output (rank 0): one line per step, then
//   final_loss=<%.9g> mean_step_ms=<...> mean_comm_ms=<...> mean_arrival_wait_ms=<...> params=<N> ...
// final_loss is the loss on a fixed evaluation set after the last update; mean_step_ms is
// the mean wall time of steps 2..N on rank 0 (step 1 includes connection set-up); mean_comm_ms
// rank 0's time inside the gradient collective; mean_arrival_wait_ms the part of it that rank 0
// waited for the slowest rank to finish computing (its compute time minus rank 0's; in
// ZeRO mode the time before also holds the parameter allgather).
// Exit status 3 if the ranks end with different parameters (they must be bit-identical).
// --done FILE: rank 0 creates FILE once the final line is printed and the ranks agreed on the
// exit status (a launcher can then end a job whose MPI hangs in MPI_Finalize: minicluster's
// --done-file, used by tools/demo.sh).

#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cmath>
#include <functional>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
  int steps = 20;
  int width = 256;
  int batch = 16;     // samples per rank per step
  int in = 64;
  int out = 16;
  uint64_t seed = 1;
  float lr = 0.2f;
  bool zero = false;  // --mode zero
  bool exact = true;  // --exact-sum
  bool overlap = false;  // --overlap (ddp): one MPI_Iallreduce per layer, started in backward
  int print_every = 1;
  std::string done_file;  // --done
};

const char* const kUsage =
    "usage: train_mlp [--mode ddp|zero] [--steps N] [--width W] [--batch B]\n"
    "                 [--in D] [--out D] [--seed S] [--lr LR] [--exact-sum 0|1]\n"
    "                 [--print-every N] [--overlap 0|1] [--done FILE]\n";

[[noreturn]] void usage_error(int rank, const std::string& msg, int code = 2) {
  if (rank == 0) {
    if (!msg.empty()) std::fprintf(stderr, "train_mlp: %s\n", msg.c_str());
    std::fputs(kUsage, code == 0 ? stdout : stderr);
  }
  MPI_Finalize();
  std::exit(code);
}

long parse_int(int rank, const char* name, const char* s, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
    usage_error(rank, std::string(name) + " wants an integer in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "], not '" + s + "'");
  return v;
}

Options parse(int argc, char** argv, int rank) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") usage_error(rank, "", 0);
    if (i + 1 >= argc) usage_error(rank, "missing value after " + a);
    const char* v = argv[++i];
    if (a == "--steps") o.steps = (int)parse_int(rank, "--steps", v, 1, 1000000);
    else if (a == "--width") o.width = (int)parse_int(rank, "--width", v, 1, 65536);
    else if (a == "--batch") o.batch = (int)parse_int(rank, "--batch", v, 1, 1 << 20);
    else if (a == "--in") o.in = (int)parse_int(rank, "--in", v, 1, 1 << 16);
    else if (a == "--out") o.out = (int)parse_int(rank, "--out", v, 1, 1 << 16);
    else if (a == "--seed") o.seed = (uint64_t)parse_int(rank, "--seed", v, 0, 1L << 62);
    else if (a == "--print-every") o.print_every = (int)parse_int(rank, "--print-every", v, 0, 1 << 30);
    else if (a == "--exact-sum") o.exact = parse_int(rank, "--exact-sum", v, 0, 1) != 0;
    else if (a == "--done") o.done_file = v;
    else if (a == "--overlap") o.overlap = parse_int(rank, "--overlap", v, 0, 1) != 0;
    else if (a == "--lr") {
      char* end = nullptr;
      o.lr = std::strtof(v, &end);
      if (end == v || *end != '\0' || !(o.lr > 0.0f)) usage_error(rank, "--lr wants a positive number");
    } else if (a == "--mode") {
      if (std::strcmp(v, "ddp") == 0) o.zero = false;
      else if (std::strcmp(v, "zero") == 0) o.zero = true;
      else usage_error(rank, std::string("--mode wants ddp or zero, not '") + v + "'");
    } else {
      usage_error(rank, "unknown option " + a);
    }
  }
  return o;
}

// Counter-based random numbers: a value is a pure function of its coordinates, so data and
// initial weights are the same on every rank and in every run, whatever the rank count.
uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
float uniform(uint64_t a, uint64_t b, uint64_t c) {  // in [-1, 1)
  uint64_t h = mix(mix(mix(a) ^ b) ^ c);
  return (float)((double)(h >> 40) * (1.0 / 8388608.0) - 1.0);
}

enum Stream : uint64_t { kInit = 1, kData = 2, kTeacher = 3, kEval = 4 };

// Parameter layout in the flat buffer. Weights are stored input-major (W[j][i] connects input j
// to output i) so that the forward pass and the weight gradient are axpy loops.
struct Layout {
  size_t w1, b1, w2, b2, w3, b3, n;
  Layout(int in, int w, int out) {
    size_t o = 0;
    w1 = o; o += (size_t)in * w;
    b1 = o; o += w;
    w2 = o; o += (size_t)w * w;
    b2 = o; o += w;
    w3 = o; o += (size_t)w * out;
    b3 = o; o += out;
    n = o;
  }
};

// y[b][:] = bias + sum_j x[b][j] * W[j][:]
void dense_forward(const float* x, int nin, const float* W, const float* bias, float* y, int nout,
                   int batch) {
  for (int b = 0; b < batch; ++b) {
    float* yb = y + (size_t)b * nout;
    std::memcpy(yb, bias, sizeof(float) * nout);
    const float* xb = x + (size_t)b * nin;
    for (int j = 0; j < nin; ++j) {
      const float xj = xb[j];
      const float* Wj = W + (size_t)j * nout;
      for (int i = 0; i < nout; ++i) yb[i] += xj * Wj[i];
    }
  }
}

// dW[j][:] += sum_b x[b][j] * dy[b][:];  db += sum_b dy[b];  dx[b][j] = <W[j][:], dy[b][:]>
void dense_backward(const float* x, int nin, const float* W, const float* dy, int nout, int batch,
                    float* dW, float* db, float* dx) {
  for (int b = 0; b < batch; ++b) {
    const float* dyb = dy + (size_t)b * nout;
    const float* xb = x + (size_t)b * nin;
    for (int i = 0; i < nout; ++i) db[i] += dyb[i];
    for (int j = 0; j < nin; ++j) {
      const float xj = xb[j];
      float* dWj = dW + (size_t)j * nout;
      for (int i = 0; i < nout; ++i) dWj[i] += xj * dyb[i];
    }
    if (dx) {
      float* dxb = dx + (size_t)b * nin;
      for (int j = 0; j < nin; ++j) {
        const float* Wj = W + (size_t)j * nout;
        // 8 partial sums in a fixed order: vectorizable without reassociation, deterministic
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int i = 0;
        for (; i + 8 <= nout; i += 8)
          for (int k = 0; k < 8; ++k) acc[k] += Wj[i + k] * dyb[i + k];
        float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        for (; i < nout; ++i) s += Wj[i] * dyb[i];
        dxb[j] = s;
      }
    }
  }
}

struct Model {
  const Options& o;
  Layout L;
  std::vector<float> teacher;  // out x in
  // activations of one batch
  std::vector<float> x, h1, h2, y, t, d2, d1, dy;

  explicit Model(const Options& opt) : o(opt), L(opt.in, opt.width, opt.out) {
    teacher.resize((size_t)o.out * o.in);
    for (size_t k = 0; k < teacher.size(); ++k)
      teacher[k] = uniform(o.seed, kTeacher, k) * (2.0f / std::sqrt((float)o.in));
  }

  void init(float* p) const {
    auto fill = [&](size_t off, size_t count, int fan_in) {
      const float scale = std::sqrt(3.0f / (float)fan_in);
      for (size_t k = 0; k < count; ++k) p[off + k] = uniform(o.seed, kInit, off + k) * scale;
    };
    fill(L.w1, (size_t)o.in * o.width, o.in);
    fill(L.w2, (size_t)o.width * o.width, o.width);
    fill(L.w3, (size_t)o.width * o.out, o.width);
    std::memset(p + L.b1, 0, sizeof(float) * o.width);
    std::memset(p + L.b2, 0, sizeof(float) * o.width);
    std::memset(p + L.b3, 0, sizeof(float) * o.out);
  }

  // Inputs in [-1, 1); target = teacher * sin(2x): smooth, learnable, not linear.
  void make_batch(uint64_t stream, uint64_t first_sample, int batch) {
    x.resize((size_t)batch * o.in);
    t.assign((size_t)batch * o.out, 0.0f);
    std::vector<float> s(o.in);
    for (int b = 0; b < batch; ++b) {
      uint64_t n = first_sample + (uint64_t)b;
      for (int j = 0; j < o.in; ++j) {
        float v = uniform(o.seed, stream, n * (uint64_t)o.in + (uint64_t)j);
        x[(size_t)b * o.in + j] = v;
        s[j] = std::sin(2.0f * v);
      }
      for (int i = 0; i < o.out; ++i) {
        float acc = 0.0f;
        for (int j = 0; j < o.in; ++j) acc += teacher[(size_t)i * o.in + j] * s[j];
        t[(size_t)b * o.out + i] = acc;
      }
    }
  }

  // Returns the summed squared error / 2 over the batch's samples and outputs.
  double forward(const float* p, int batch) {
    h1.resize((size_t)batch * o.width);
    h2.resize((size_t)batch * o.width);
    y.resize((size_t)batch * o.out);
    dense_forward(x.data(), o.in, p + L.w1, p + L.b1, h1.data(), o.width, batch);
    for (float& v : h1) v = std::tanh(v);
    dense_forward(h1.data(), o.width, p + L.w2, p + L.b2, h2.data(), o.width, batch);
    for (float& v : h2) v = std::tanh(v);
    dense_forward(h2.data(), o.width, p + L.w3, p + L.b3, y.data(), o.out, batch);
    double sse = 0.0;
    for (size_t k = 0; k < y.size(); ++k) {
      double e = (double)y[k] - (double)t[k];
      sse += 0.5 * e * e;
    }
    return sse;
  }

  // Gradient of (sum of per-sample losses) / norm, into g (zeroed here). layer_done(first, n),
  // if given, is called as soon as a layer's gradients g[first, first + n) are final (layer 3,
  // then 2, then 1), so that their sum can start while the next layer's are computed.
  void backward(const float* p, int batch, float norm, float* g,
                const std::function<void(size_t, size_t)>& layer_done = nullptr) {
    std::memset(g, 0, sizeof(float) * L.n);
    dy.resize(y.size());
    for (size_t k = 0; k < y.size(); ++k) dy[k] = (y[k] - t[k]) / norm;
    d2.resize(h2.size());
    dense_backward(h2.data(), o.width, p + L.w3, dy.data(), o.out, batch, g + L.w3, g + L.b3,
                   d2.data());
    if (layer_done) layer_done(L.w3, L.n - L.w3);
    for (size_t k = 0; k < d2.size(); ++k) d2[k] *= 1.0f - h2[k] * h2[k];
    d1.resize(h1.size());
    dense_backward(h1.data(), o.width, p + L.w2, d2.data(), o.width, batch, g + L.w2, g + L.b2,
                   d1.data());
    if (layer_done) layer_done(L.w2, L.w3 - L.w2);
    for (size_t k = 0; k < d1.size(); ++k) d1[k] *= 1.0f - h1[k] * h1[k];
    dense_backward(x.data(), o.in, p + L.w1, d1.data(), o.width, batch, g + L.w1, g + L.b1,
                   nullptr);
    if (layer_done) layer_done(L.w1, L.w2 - L.w1);
  }
};

// Clip to [-1, 1] and round to a multiple of 2^-k: sums of up to 2^(24-k) such values are
// exact in float32 (integers times 2^-k below 2^24), in any order.
void snap_to_grid(float* g, size_t n, int k) {
  const float scale = std::ldexp(1.0f, k), inv = std::ldexp(1.0f, -k);
  for (size_t i = 0; i < n; ++i) {
    float v = g[i] > 1.0f ? 1.0f : (g[i] < -1.0f ? -1.0f : g[i]);
    g[i] = std::nearbyint(v * scale) * inv;
  }
}

uint64_t fnv1a(const float* p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  const unsigned char* c = reinterpret_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n * sizeof(float); ++i) h = (h ^ c[i]) * 1099511628211ULL;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)  // --help before MPI_Init: no launcher or MPI needed
    if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  // --overlap 1: threads allowed, so that a progress thread (libhier's HIER_PROGRESS=thread, or
  // the MPI's own) may advance the nonblocking sums while backward computes.
  bool threads = false;
  for (int i = 1; i + 1 < argc; ++i) threads |= std::string(argv[i]) == "--overlap" && std::string(argv[i + 1]) == "1";
  if (threads) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Options o = parse(argc, argv, rank);

  Model m(o);
  const size_t n = m.L.n;
  // ZeRO shards: the flat buffer padded to a multiple of the world size.
  const size_t shard = (n + size - 1) / size;
  const size_t npad = shard * size;
  std::vector<float> params(npad, 0.0f), grads(npad, 0.0f), gshard, pshard;
  m.init(params.data());
  if (o.zero) {
    pshard.assign(params.begin() + (std::ptrdiff_t)(rank * shard), params.begin() + (std::ptrdiff_t)((rank + 1) * shard));
    gshard.resize(shard);
  }
  int grid_bits = 24;
  while (grid_bits > 0 && (1L << (24 - grid_bits)) < size) --grid_bits;

  if (rank == 0)
    std::printf("train_mlp: mode=%s ranks=%d width=%d in=%d out=%d batch=%d/rank steps=%d "
                "params=%zu (%.1f MiB of gradients) exact_sum=%d\n",
                o.zero ? "zero" : "ddp", size, o.width, o.in, o.out, o.batch, o.steps, n,
                (double)n * sizeof(float) / 1048576.0, o.exact ? 1 : 0);

  const float norm = (float)o.batch * (float)o.out;  // local mean over samples and outputs
  const float step_scale = o.lr / (float)size;       // mean of the P local gradients
  double sum_step = 0.0, sum_comm = 0.0, sum_wait = 0.0;
  // Per rank {loss, time before the step's communication}, gathered on rank 0 after the step.
  std::vector<double> losses(rank == 0 ? 2 * size : 2);
  for (int s = 0; s < o.steps; ++s) {
    MPI_Barrier(MPI_COMM_WORLD);  // steps start together: step times are comparable
    const double t0 = MPI_Wtime();
    double comm = 0.0, c0;
    if (o.zero) {
      c0 = MPI_Wtime();
      MPI_Allgather(pshard.data(), (int)shard, MPI_FLOAT, params.data(), (int)shard, MPI_FLOAT,
                    MPI_COMM_WORLD);
      comm += MPI_Wtime() - c0;
    }
    const uint64_t first = (uint64_t)s * (uint64_t)o.batch * (uint64_t)size + (uint64_t)rank * o.batch;
    m.make_batch(kData, first, o.batch);
    const double sse = m.forward(params.data(), o.batch);
    if (o.overlap && !o.zero) {
      // Bucketed data parallelism (as PyTorch DDP does): each layer's gradients are summed by
      // an MPI_Iallreduce started as soon as backward has them, all waited before the update.
      std::vector<MPI_Request> reqs;
      m.backward(params.data(), o.batch, norm, grads.data(), [&](size_t first, size_t count) {
        if (o.exact) snap_to_grid(grads.data() + first, count, grid_bits);
        reqs.emplace_back();
        MPI_Iallreduce(MPI_IN_PLACE, grads.data() + first, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                       &reqs.back());
      });
      c0 = MPI_Wtime();
      MPI_Waitall((int)reqs.size(), reqs.data(), MPI_STATUSES_IGNORE);
    } else {
      m.backward(params.data(), o.batch, norm, grads.data());
      if (o.exact) snap_to_grid(grads.data(), n, grid_bits);
      c0 = MPI_Wtime();
    }
    if (o.overlap && !o.zero) {
      // summed above, layer by layer
    } else if (o.zero) {
      MPI_Reduce_scatter_block(grads.data(), gshard.data(), (int)shard, MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD);
    } else {
      MPI_Allreduce(MPI_IN_PLACE, grads.data(), (int)npad, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    comm += MPI_Wtime() - c0;
    if (o.zero) {
      for (size_t k = 0; k < shard; ++k) pshard[k] -= step_scale * gshard[k];
    } else {
      for (size_t k = 0; k < n; ++k) params[k] -= step_scale * grads[k];
    }
    const double dt = MPI_Wtime() - t0;
    // Loss: gathered (a copy, exact) and summed in rank order on rank 0, so the printed value
    // does not depend on how the MPI reduces doubles.
    // The compute time before the communication goes along: a rank that computed faster than
    // the slowest one waits inside the collective for the difference (arrival skew), which
    // comm counts but no collective algorithm can remove.
    const double local[2] = {sse / (double)norm, c0 - t0};  // loss: mean over this rank's samples
    MPI_Gather(local, 2, MPI_DOUBLE, losses.data(), 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (s > 0 || o.steps == 1) {
      sum_step += dt;
      sum_comm += comm;
    }
    if (rank == 0) {
      double loss = 0.0, slowest = 0.0;
      for (int r = 0; r < size; ++r) {
        loss += losses[2 * r];
        slowest = std::max(slowest, losses[2 * r + 1]);
      }
      loss /= size;
      if (s > 0 || o.steps == 1) sum_wait += slowest - local[1];
      if (o.print_every > 0 && ((s + 1) % o.print_every == 0 || s == 0 || s + 1 == o.steps))
        std::printf("step %d/%d loss %.6f step_ms %.2f comm_ms %.2f\n", s + 1, o.steps, loss,
                    dt * 1e3, comm * 1e3);
      std::fflush(stdout);
    }
  }
  if (o.zero)  // the last update lives in the shards
    MPI_Allgather(pshard.data(), (int)shard, MPI_FLOAT, params.data(), (int)shard, MPI_FLOAT,
                  MPI_COMM_WORLD);

  // Every rank must end with bit-identical parameters (MPI requires one reduction result on all
  // ranks; libhier promises it): compare checksums.
  uint64_t mine = fnv1a(params.data(), n);
  std::vector<uint64_t> sums(rank == 0 ? size : 1);
  MPI_Gather(&mine, 1, MPI_UINT64_T, sums.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  int status = 0;
  if (rank == 0) {
    for (int r = 1; r < size; ++r)
      if (sums[r] != sums[0]) {
        std::fprintf(stderr, "train_mlp: rank %d ended with different parameters than rank 0\n", r);
        status = 3;
      }
    // Evaluation on a fixed set, the same whatever the rank count layout of the data.
    const int neval = 256;
    m.make_batch(kEval, 0, neval);
    const double eval = m.forward(params.data(), neval) / ((double)neval * o.out);
    const int timed = o.steps > 1 ? o.steps - 1 : 1;
    std::printf("final_loss=%.9g mean_step_ms=%.3f mean_comm_ms=%.3f mean_arrival_wait_ms=%.3f params=%zu "
                "grad_bytes=%zu ranks=%d mode=%s checksum=%016llx\n",
                eval, sum_step / timed * 1e3, sum_comm / timed * 1e3, sum_wait / timed * 1e3, n, npad * sizeof(float), size,
                o.zero ? "zero" : "ddp", (unsigned long long)sums[0]);
    std::fflush(stdout);
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0 && !o.done_file.empty())
    if (FILE* f = std::fopen(o.done_file.c_str(), "w")) std::fclose(f);
  MPI_Finalize();
  return status;
}
