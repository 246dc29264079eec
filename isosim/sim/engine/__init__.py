"""The simulator engine: count-based GRPO on bandit problems, many runs as one computation.

A run trains a softmax policy over K responses per problem. Each step it takes the next ``b_p``
problems of its own shuffled epoch order, draws ``n`` responses for each, scores them (1 if
correct) and applies a GRPO update. All runs handed to :func:`simulate` that share a
``SimConfig.batch_key`` advance together: their parameters carry a leading run axis, differing
``n`` and ``b_p`` are padded and masked, and a run that has spent its budget leaves the batch (which
then narrows to the widest ``b_p`` still going). Runs with dense memorisation features batch by
``b_p`` as well (a padded problem slot would gather and multiply its ``K x mem_dim`` rows), and
``simulate(..., workers=2)`` steps some batches in a helper process on a second core
(:mod:`isosim.sim.workers`).

Where this departs from a per-rollout GRPO implementation (and why it is the same in law):

* Rewards are 0/1 and a group's policy gradient depends on its draws only through how often
  each response was drawn, so the engine draws the *counts* ``c ~ Multinomial(n, pi)`` and
  uses ``sum_i A_i grad log pi(a_i) = sum_k c_k A_k e_k - (sum_i A_i) pi`` (gradient with
  respect to the logits). A step's cost does not grow with ``n``.
* Counts for ``n <= DIRECT_MAX`` come from ``n`` uniforms per problem (inverse CDF), above it
  from numpy's multinomial; both are exact draws. A run whose policy is the default linear one
  with skill features only and no response-length model (:func:`correct_only`) needs only the
  number of correct draws ``m ~ Binomial(n, p)``: the engine draws it as the count of the
  group's ``n`` uniforms below its pass rate ``p`` (the inverse CDF with the correct responses
  ordered first), above ``DIRECT_MAX`` as one numpy binomial. The same law as counting correct
  responses among multinomial counts, without touching the K responses, and the same draws
  whichever path (closed form or general) the run's batch takes.
* The default linear policy (skill features only, each problem loading ``a_p`` on its correct
  responses) is a one-parameter family per problem: ``pass rate = sigmoid(y + log-odds of the
  base)`` with ``y = a_p h_c``. The engine then computes the update and the evaluation in closed
  form per problem (:meth:`LinearFeatures._closed_form`); only the draws look at every response.
  Same results as the general path (softmax over responses) to rounding; any other policy, a
  typicality or memorisation part, or a tabular part takes the general path.
* Every run owns its random streams (numpy ``Generator`` seeded from its ``seed``): problem
  order, rollout draws, the extra draws of a decoupled baseline and sampled evaluations, each
  drawn for the run's own ``b_p`` groups only. A run's result therefore does not depend on which
  other runs share its batch: bit for bit when the batch takes the run's own path, to rounding
  (~1e-15) when another run's settings send the batch down the general path.
* KL and entropy terms are exact expectations over the K responses (a real trainer estimates
  them from sampled tokens, e.g. with the k3 estimator; the expectation is the same).
* Evaluation is exact: avg@k = mean p, best@k = mean 1-(1-p)^k, worst@k = mean p^k, with
  optional sampled estimates (``eval_samples``).
* The loss is normalised by the number of rollouts in the (kept) groups, as in GRPO with
  sequence-level averaging; there are no tokens, so there is no length normalisation question.

The engine is a package, one module per concern:

==============  ==========================================================================
``streams``     each run's random streams (problem order, uniforms) and the draws from them
``policies``    parameters, logits, the linear / tabular backward, the linear closed form
``grpo``        advantages (:mod:`isosim.sim.advantage`'s formula), gradients, one GRPO step
``optim``       weight decay, clipping, SGD / Adam(W), warm-up, trust region
``evaluation``  exact and sampled avg@k / best@k / worst@k, entropy, KL; evaluation steps
``state``       the state of a batch of runs advancing together (:class:`state._Batch`)
``batch``       the step loop over a batch of runs, :func:`simulate`
``serve``       the helper process of ``simulate(..., workers=2)`` (:mod:`isosim.sim.workers`)
==============  ==========================================================================

Every name below is importable from ``isosim.sim.engine``.
"""

from isosim.sim.engine.batch import CHUNK, CHUNK_ROWS, simulate
from isosim.sim.engine.evaluation import (
    EVAL_BLOCK,
    FEW_POPULATIONS,
    all_logits,
    eval_steps,
    evaluate,
    evaluate_closed,
    sampled_metrics,
    summarise,
    unbiased_best_worst,
)
from isosim.sim.engine.grpo import (
    ADV_EPS,
    advantages,
    draw_correct,
    logit_gradient,
    regulariser_gradient,
)
from isosim.sim.engine.optim import ADAM_EPS
from isosim.sim.engine.policies import (
    LinearFeatures,
    feature_scale,
    init_params,
    linear_backward,
    logits,
    tabular_gradient,
    tabular_logits,
)
from isosim.sim.engine.streams import (
    CORRECT_ONLY,
    DIRECT_MAX,
    RunStreams,
    bin_counts,
    correct_only,
    draw_bins,
    sample_correct,
    sample_counts,
)

__all__ = [
    "ADAM_EPS", "ADV_EPS", "CHUNK", "CHUNK_ROWS", "CORRECT_ONLY", "DIRECT_MAX", "EVAL_BLOCK", "FEW_POPULATIONS",
    "LinearFeatures", "RunStreams", "advantages", "all_logits", "bin_counts", "correct_only", "draw_bins",
    "draw_correct", "eval_steps", "evaluate", "evaluate_closed", "feature_scale", "init_params",
    "linear_backward", "logit_gradient", "logits", "regulariser_gradient", "sample_correct", "sample_counts",
    "sampled_metrics", "simulate", "summarise", "tabular_gradient", "tabular_logits", "unbiased_best_worst",
]
