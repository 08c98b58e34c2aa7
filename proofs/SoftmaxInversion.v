(* Theorem 4 (softmax inversion; tutorial Equation 2-7; docs/math.md item 2),
   over Coq's real numbers. For a row s of n >= 1 finite scores and a row a of
   positive weights:
   - softmax s = a  iff  s_j = ln a_j + ln (sum_k exp s_k) for every j;
   - softmax (s + c 1) = softmax s for every constant c;
   - when a sums to 1: softmax s = a iff s = ln a + c 1 for some constant c.
   Checked numerically by: tests/softmax.test.cpp, property "softmax is unchanged
   by adding a constant to a row", and tests/reach.test.cpp, properties "the
   verdict does not change when rows of the target are scaled" and "every
   certificate is accepted by the checker, and witnesses meet their bounds" (a
   witness's error is softmax(Q K^T) against A).
   Used by include/attnrank/softmax_inversion.hpp (every verdict starts from it). *)
Require Import Reals Lra Lia.
Open Scope R_scope.

(* sum_to f n = f 0 + ... + f (n - 1). *)
Fixpoint sum_to (f : nat -> R) (n : nat) : R :=
  match n with O => 0 | S k => sum_to f k + f k end.

Definition partition (s : nat -> R) (n : nat) : R := sum_to (fun k => exp (s k)) n.

Definition softmax (s : nat -> R) (n j : nat) : R := exp (s j) / partition s n.

Lemma sum_to_pos (f : nat -> R) n : (0 < n)%nat -> (forall k, 0 < f k) -> 0 < sum_to f n.
Proof.
intros Hn Hf; induction n as [|n IH]; [lia |].
simpl; destruct n as [|n].
- simpl; specialize (Hf 0%nat); lra.
- assert (0 < sum_to f (S n)) by (apply IH; lia); specialize (Hf (S n)); lra.
Qed.

Lemma sum_to_scale (f : nat -> R) c n : sum_to (fun k => c * f k) n = c * sum_to f n.
Proof. induction n as [|n IH]; simpl; [ring | rewrite IH; ring]. Qed.

Lemma sum_to_ext (f g : nat -> R) n : (forall k, (k < n)%nat -> f k = g k) -> sum_to f n = sum_to g n.
Proof.
induction n as [|n IH]; intro H; simpl; [reflexivity |].
rewrite IH by (intros; apply H; lia); rewrite (H n) by lia; reflexivity.
Qed.

Lemma partition_pos s n : (0 < n)%nat -> 0 < partition s n.
Proof. intro Hn; apply sum_to_pos; [exact Hn | intro k; apply exp_pos]. Qed.

(* Adding c to every score multiplies the partition function by exp c ... *)
Lemma partition_shift s c n : partition (fun k => s k + c) n = exp c * partition s n.
Proof.
unfold partition; rewrite <- sum_to_scale; apply sum_to_ext.
intros k _; rewrite exp_plus; ring.
Qed.

(* ... so softmax does not see row constants. *)
Theorem softmax_shift s c n j : (0 < n)%nat -> softmax (fun k => s k + c) n j = softmax s n j.
Proof.
intro Hn; unfold softmax; rewrite partition_shift, exp_plus.
assert (Z := partition_pos s n Hn); assert (E := exp_pos c).
field; split; lra.
Qed.

(* Equation 2-7: the scores that produce a are ln a plus the row's log-partition. *)
Theorem softmax_inversion s (a : nat -> R) n : (0 < n)%nat -> (forall j, (j < n)%nat -> 0 < a j) ->
  (forall j, (j < n)%nat -> softmax s n j = a j) <->
  (forall j, (j < n)%nat -> s j = ln (a j) + ln (partition s n)).
Proof.
intros Hn Ha; assert (Z := partition_pos s n Hn); split; intros H j Hj.
- rewrite <- (H j Hj); unfold softmax, Rdiv.
  rewrite ln_mult by (apply exp_pos || apply Rinv_0_lt_compat; exact Z).
  rewrite ln_Rinv by exact Z; rewrite ln_exp; ring.
- unfold softmax; rewrite (H j Hj), exp_plus, exp_ln by (apply Ha; exact Hj).
  rewrite exp_ln by exact Z; field; lra.
Qed.

(* With a normalised target, "s = ln a + c 1 for some c" is the whole answer. *)
Theorem softmax_iff_log_shift s (a : nat -> R) n : (0 < n)%nat ->
  (forall j, (j < n)%nat -> 0 < a j) -> sum_to a n = 1 ->
  (forall j, (j < n)%nat -> softmax s n j = a j) <->
  exists c, forall j, (j < n)%nat -> s j = ln (a j) + c.
Proof.
intros Hn Ha Hsum; split.
- intro H; exists (ln (partition s n)); apply softmax_inversion; assumption.
- intros [c Hc] j Hj; unfold softmax.
  assert (P : partition s n = exp c * sum_to a n).
  { unfold partition; rewrite <- sum_to_scale; apply sum_to_ext; intros k Hk.
    rewrite (Hc k Hk), exp_plus, exp_ln by (apply Ha; exact Hk); ring. }
  rewrite P, Hsum, (Hc j Hj), exp_plus, exp_ln by (apply Ha; exact Hj).
  assert (E := exp_pos c); field; lra.
Qed.

(* A zero weight is produced by no finite score: softmax is positive. *)
Theorem softmax_pos s n j : (0 < n)%nat -> 0 < softmax s n j.
Proof.
intro Hn; unfold softmax; apply Rdiv_lt_0_compat; [apply exp_pos | apply partition_pos; exact Hn].
Qed.
