(* Theorem 5 (the d_k = 1 head; tutorial Section 2.5.4 and Appendix A,
   Question 1; docs/math.md item 7), over Coq's real numbers. With scores q k_j:
   - softmax is monotone: a larger score gets a larger weight, and conversely;
   - q > 0: the top-weighted token maximises k; q < 0: it minimises k;
     q = 0: the row is flat;
   - with the tutorial's keys (2, 0, 1), LLMs' weight 1 / (1 + 2 cosh q) is at
     most 1/3, so no q gives it 0.34 (the second "Try it").
   Checked numerically by: tests/reach.test.cpp, property "d_k = 1: the
   top-weighted token is argmax k or argmin k, or the row is flat (Question 1)";
   the appendix prints the bound (tests/appendix_cli.test.cpp). *)
Require Import Reals Lra Lia.
From Attnrank Require Import SoftmaxInversion.
Open Scope R_scope.

Theorem softmax_monotone s n i j : (0 < n)%nat ->
  (softmax s n i <= softmax s n j <-> s i <= s j).
Proof.
intro Hn; assert (Z := partition_pos s n Hn); unfold softmax, Rdiv; split; intro H.
- apply Rmult_le_reg_r in H; [| apply Rinv_0_lt_compat; exact Z].
  destruct (Rle_or_lt (s i) (s j)) as [|Hlt]; [assumption |].
  apply exp_increasing in Hlt; lra.
- apply Rmult_le_compat_r; [left; apply Rinv_0_lt_compat; exact Z |].
  destruct H as [Hlt | ->]; [left; apply exp_increasing; exact Hlt | right; reflexivity].
Qed.

Definition scores (q : R) (k : nat -> R) : nat -> R := fun j => q * k j.

(* j takes the top weight of its row: no token i < n gets more. *)
Definition top (s : nat -> R) (n j : nat) : Prop := forall i, (i < n)%nat -> softmax s n i <= softmax s n j.

Theorem top_is_argmax q k n j : (0 < n)%nat -> 0 < q ->
  top (scores q k) n j <-> forall i, (i < n)%nat -> k i <= k j.
Proof.
intros Hn Hq; unfold top; split; intros H i Hi; specialize (H i Hi).
- apply (softmax_monotone (scores q k) n i j Hn) in H; unfold scores in H.
  apply Rmult_le_reg_l in H; assumption.
- apply (softmax_monotone (scores q k) n i j Hn); unfold scores.
  apply Rmult_le_compat_l; [left; exact Hq | exact H].
Qed.

Theorem top_is_argmin q k n j : (0 < n)%nat -> q < 0 ->
  top (scores q k) n j <-> forall i, (i < n)%nat -> k j <= k i.
Proof.
intros Hn Hq; unfold top; split; intros H i Hi; specialize (H i Hi).
- apply (softmax_monotone (scores q k) n i j Hn) in H; unfold scores in H.
  apply Ropp_le_cancel; apply (Rmult_le_reg_l (- q)); [lra | nra].
- apply (softmax_monotone (scores q k) n i j Hn); unfold scores; nra.
Qed.

Theorem flat_at_zero k n i j : softmax (scores 0 k) n i = softmax (scores 0 k) n j.
Proof. unfold softmax, scores; rewrite !Rmult_0_l; reflexivity. Qed.

(* So the top token of any row is an argmax or an argmin of the keys, or the row is flat. *)
Corollary top_is_extreme q k n j : (0 < n)%nat -> top (scores q k) n j ->
  (forall i, (i < n)%nat -> k i <= k j) \/ (forall i, (i < n)%nat -> k j <= k i) \/ q = 0.
Proof.
intros Hn H; destruct (Rtotal_order q 0) as [Hq | [Hq | Hq]].
- right; left; apply (top_is_argmin q k n j Hn Hq); exact H.
- right; right; exact Hq.
- left; apply (top_is_argmax q k n j Hn Hq); exact H.
Qed.

(* The tutorial's keys: I = 2, love = 0, LLMs = 1. *)
Definition tutorial_keys (j : nat) : R := match j with 0%nat => 2 | 1%nat => 0 | _ => 1 end.

Theorem llms_at_most_one_third q : softmax (scores q tutorial_keys) 3 2 <= 1 / 3.
Proof.
unfold softmax, partition, scores, tutorial_keys; simpl.
replace (q * 2) with (q + q) by ring; replace (q * 0) with 0 by ring; replace (q * 1) with q by ring.
rewrite exp_plus, exp_0.
set (t := exp q); assert (Ht : 0 < t) by apply exp_pos.
assert (Htt : 0 < t * t) by (apply Rmult_lt_0_compat; lra).
apply (Rmult_le_reg_r (0 + t * t + 1 + t)); [lra |].
unfold Rdiv; rewrite Rmult_assoc, Rinv_l by lra.
assert (Sq : 0 <= (t - 1) * (t - 1)) by apply Rle_0_sqr.
replace (1 * / 3 * (0 + t * t + 1 + t)) with (t + (t - 1) * (t - 1) / 3) by field.
lra.
Qed.

Corollary llms_never_034 q : softmax (scores q tutorial_keys) 3 2 < 34 / 100.
Proof. pose proof (llms_at_most_one_third q); lra. Qed.
