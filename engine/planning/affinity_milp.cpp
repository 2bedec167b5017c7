#include "engine/planning/affinity_milp.hpp"

#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/seconds_between.hpp"
#include "kernels/assert.hpp"

namespace muflow::engine::planning::affinity_detail {
namespace {

using Clock = std::chrono::steady_clock;

std::mutex& glpk_mutex() {
  static std::mutex mu;
  return mu;
}

struct CallbackInfo {
  const std::vector<double>* warm = nullptr;  // 1-based column values
  bool warm_given = false;
  double bound = -std::numeric_limits<double>::infinity();
};

void milp_callback(glp_tree* tree, void* info) {
  auto* cb = static_cast<CallbackInfo*>(info);
  if (glp_ios_reason(tree) == GLP_IHEUR && !cb->warm_given) {
    cb->warm_given = true;
    glp_ios_heur_sol(tree, cb->warm->data());  // rejected (nonzero) only if not better
  }
  if (const int node = glp_ios_best_node(tree); node != 0) {
    cb->bound = std::max(cb->bound, glp_ios_node_bound(tree, node));
  }
}

int to_glpk_ms(double seconds) {
  const double ms = std::floor(seconds * 1000.0);
  return static_cast<int>(std::clamp(ms, 1.0, static_cast<double>(INT_MAX / 2)));
}

}  // namespace

MilpOutcome solve_milp(const SubProblem& p, const Parts& warm, double budget_s,
                       int64_t max_nonzeros) {
  MilpOutcome out;
  out.parts = warm;
  const int64_t L = p.num_layers, m = p.m, C = p.num_parts;
  if (C == 1) {
    out.optimal = true;
    out.gap = 0.0;
    return out;
  }
  struct Pair {
    int64_t s, i, j, w;
  };
  std::vector<Pair> pairs;
  for (int64_t s = 0; s + 1 < L; ++s) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        if (const int64_t w = p.at(s, i, j); w > 0) pairs.push_back({s, i, j, w});
      }
    }
  }
  const int64_t num_x = L * m * C;
  const int64_t num_y = static_cast<int64_t>(pairs.size());
  const int64_t nnz = 2 * num_x + 3 * num_y * C;
  const int64_t num_rows = L * m + L * C + num_y * C;
  const int64_t limit = std::min<int64_t>(max_nonzeros, INT_MAX / 4);
  if (budget_s <= 0.0 || nnz > limit || num_rows > limit || num_x + num_y > limit) return out;

  const auto start = Clock::now();
  std::lock_guard<std::mutex> lock(glpk_mutex());
  const int previous_term = glp_term_out(GLP_OFF);
  std::unique_ptr<glp_prob, void (*)(glp_prob*)> prob(glp_create_prob(), glp_delete_prob);
  glp_prob* P = prob.get();
  glp_set_obj_dir(P, GLP_MIN);
  auto xcol = [&](int64_t s, int64_t i, int64_t c) {
    return static_cast<int>(1 + (s * m + i) * C + c);
  };
  glp_add_cols(P, static_cast<int>(num_x + num_y));
  for (int64_t s = 0; s < L; ++s) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < C; ++c) {
        const int col = xcol(s, i, c);
        glp_set_col_kind(P, col, GLP_BV);
        if (s == 0 && c > i) glp_set_col_bnds(P, col, GLP_FX, 0.0, 0.0);  // symmetry breaking
      }
    }
  }
  for (int64_t k = 0; k < num_y; ++k) {
    const int col = static_cast<int>(1 + num_x + k);
    glp_set_col_bnds(P, col, GLP_DB, 0.0, 1.0);
    glp_set_obj_coef(P, col, static_cast<double>(pairs[static_cast<size_t>(k)].w));
  }
  glp_add_rows(P, static_cast<int>(num_rows));
  std::vector<int> ia(static_cast<size_t>(nnz + 1)), ja(static_cast<size_t>(nnz + 1));
  std::vector<double> ar(static_cast<size_t>(nnz + 1));
  int row = 0, k = 0;
  auto put = [&](int r, int col, double v) {
    ++k;
    ia[static_cast<size_t>(k)] = r;
    ja[static_cast<size_t>(k)] = col;
    ar[static_cast<size_t>(k)] = v;
  };
  for (int64_t s = 0; s < L; ++s) {  // Σ_c x[s,i,c] = 1
    for (int64_t i = 0; i < m; ++i) {
      glp_set_row_bnds(P, ++row, GLP_FX, 1.0, 1.0);
      for (int64_t c = 0; c < C; ++c) put(row, xcol(s, i, c), 1.0);
    }
  }
  for (int64_t s = 0; s < L; ++s) {  // Σ_i x[s,i,c] = m / C
    for (int64_t c = 0; c < C; ++c) {
      const double cap = static_cast<double>(p.cap());
      glp_set_row_bnds(P, ++row, GLP_FX, cap, cap);
      for (int64_t i = 0; i < m; ++i) put(row, xcol(s, i, c), 1.0);
    }
  }
  for (int64_t y = 0; y < num_y; ++y) {  // y − x[s,i,c] + x[s+1,j,c] ≥ 0
    const Pair& pr = pairs[static_cast<size_t>(y)];
    for (int64_t c = 0; c < C; ++c) {
      glp_set_row_bnds(P, ++row, GLP_LO, 0.0, 0.0);
      put(row, static_cast<int>(1 + num_x + y), 1.0);
      put(row, xcol(pr.s, pr.i, c), -1.0);
      put(row, xcol(pr.s + 1, pr.j, c), 1.0);
    }
  }
  MUFLOW_ASSERT(row == num_rows && k == nnz, "affinity MILP row/nonzero count mismatch");
  glp_load_matrix(P, static_cast<int>(nnz), ia.data(), ja.data(), ar.data());

  std::vector<double> warm_x(static_cast<size_t>(1 + num_x + num_y), 0.0);
  for (int64_t s = 0; s < L; ++s) {
    for (int64_t i = 0; i < m; ++i) {
      warm_x[static_cast<size_t>(xcol(s, i, warm[static_cast<size_t>(s * m + i)]))] = 1.0;
    }
  }
  for (int64_t y = 0; y < num_y; ++y) {
    const Pair& pr = pairs[static_cast<size_t>(y)];
    warm_x[static_cast<size_t>(1 + num_x + y)] =
        warm[static_cast<size_t>(pr.s * m + pr.i)] !=
                warm[static_cast<size_t>((pr.s + 1) * m + pr.j)]
            ? 1.0
            : 0.0;
  }

  auto remaining = [&] { return budget_s - seconds_between(start, Clock::now()); };
  bool have_solution = false;
  if (remaining() > 0.0) {
    glp_smcp smcp;
    glp_init_smcp(&smcp);
    smcp.msg_lev = GLP_MSG_OFF;
    smcp.presolve = GLP_OFF;
    // The all-slack start is dual feasible (w ≥ 0, x has cost 0), and on this very degenerate
    // LP the dual simplex reached the root optimum ~20% sooner than the primal in our runs.
    smcp.meth = GLP_DUALP;
    smcp.tm_lim = to_glpk_ms(remaining());
    if (glp_simplex(P, &smcp) == 0 && glp_get_status(P) == GLP_OPT && remaining() > 0.0) {
      CallbackInfo cb;
      cb.warm = &warm_x;
      glp_iocp iocp;
      glp_init_iocp(&iocp);
      iocp.msg_lev = GLP_MSG_OFF;
      iocp.presolve = GLP_OFF;
      iocp.tm_lim = to_glpk_ms(remaining());
      iocp.cb_func = milp_callback;
      iocp.cb_info = &cb;
      glp_intopt(P, &iocp);
      const int status = glp_mip_status(P);
      if (status == GLP_OPT || status == GLP_FEAS) {
        Parts parts(static_cast<size_t>(L * m), -1);
        for (int64_t s = 0; s < L; ++s) {
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t c = 0; c < C; ++c) {
              if (glp_mip_col_val(P, xcol(s, i, c)) > 0.5)
                parts[static_cast<size_t>(s * m + i)] = c;
            }
          }
        }
        if (balanced(p, parts)) {
          have_solution = true;
          if (sub_objective(p, parts) <= sub_objective(p, warm)) out.parts = std::move(parts);
          canonicalize(p, out.parts);
          const double value = static_cast<double>(sub_objective(p, out.parts));
          if (status == GLP_OPT) {
            out.optimal = true;
            out.gap = 0.0;
          } else if (std::isfinite(cb.bound)) {
            const double bound = std::max(0.0, std::ceil(cb.bound - 1e-6));
            out.gap = value > 0.0 ? std::max(0.0, (value - bound) / value) : 0.0;
          }
        }
      }
    }
  }
  glp_term_out(previous_term);
  if (!have_solution) out.parts = warm;
  return out;
}

}  // namespace muflow::engine::planning::affinity_detail
