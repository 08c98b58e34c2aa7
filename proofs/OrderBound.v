(* Theorem 8c (the approximate question at width 1; docs/math.md, "The order
   bound at width 1"), over Coq's real numbers. Three steps:
   - a head within e of the target keeps every order whose gap exceeds 2 e;
   - within a row, softmax orders two keys as their scores (one normaliser);
   - a width-1 head's scores q_r k_j cannot order two key pairs alike in one
     row and oppositely in another.
   Checked numerically by: tests/reach/order_bound.test.cpp, property "never
   above the certified error of the width-1 head that made the target ...".
   Used by include/attnrank/reach/detail/order_bound.hpp. *)
Require Import Reals Lra Psatz.
Open Scope R_scope.

Theorem order_kept (p p' a a' e : R) :
  Rabs (p - a) <= e -> Rabs (p' - a') <= e -> 2 * e < a - a' -> p' < p.
Proof.
intros H H' Hgap.
destruct (Rle_or_lt 0 (p - a)); [rewrite Rabs_right in H by lra | rewrite Rabs_left in H by lra];
destruct (Rle_or_lt 0 (p' - a')); [rewrite Rabs_right in H' by lra | rewrite Rabs_left in H' by lra
                                   | rewrite Rabs_right in H' by lra | rewrite Rabs_left in H' by lra]; lra.
Qed.

Theorem softmax_order (s t z : R) : 0 < z -> exp t / z < exp s / z -> t < s.
Proof.
intros Hz H.
apply exp_lt_inv.
apply (Rmult_lt_reg_r (/ z)); [apply Rinv_0_lt_compat; exact Hz | exact H].
Qed.

Theorem width_one_orders (qi qk x y : R) :
  0 < (qi * x) * (qi * y) -> (qk * x) * (qk * y) < 0 -> False.
Proof.
intros Halike Hopposite.
assert (Hxy : 0 < x * y).
{ assert (E : (qi * x) * (qi * y) = (qi * qi) * (x * y)) by ring.
  rewrite E in Halike.
  destruct (Rlt_or_le 0 (x * y)) as [P | N]; [exact P |].
  assert (0 <= qi * qi) by nra. nra. }
assert (E : (qk * x) * (qk * y) = (qk * qk) * (x * y)) by ring.
rewrite E in Hopposite.
assert (0 <= qk * qk) by nra.
nra.
Qed.
