(* What each theorem rests on, printed by the proofs build (proofs/build.cmake):
   the MathComp theorems must be "Closed under the global context" (no axioms at
   all); the real-number ones may use only the axioms of Coq's standard Reals. *)
From Attnrank Require Import Ceiling Subadditivity ExactFloor Reachability DiagonalTarget.
From Attnrank Require Import SoftmaxInversion Winners ApproximateRank LogErrorBound MaskedFloor OrderBound.

Print Assumptions rank_scores_le_dk.
Print Assumptions seed_floor_sub.
Print Assumptions exact_floor_min.
Print Assumptions reachable_iff_floor_le.
Print Assumptions det_aI_bJ.
Print Assumptions rank_diagonal_floor.
Print Assumptions centered_block_rank_le.
Print Assumptions rank_ones_appended.
Print Assumptions masked_floor_le.
Print Assumptions masked_floor_attained.
Print Assumptions softmax_iff_log_shift.
Print Assumptions top_is_extreme.
Print Assumptions llms_never_034.
Print Assumptions log_error_bound.
Print Assumptions order_kept.
Print Assumptions softmax_order.
Print Assumptions width_one_orders.
