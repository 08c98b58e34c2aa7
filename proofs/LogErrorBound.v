(* Theorem 8b (the approximate question; docs/math.md item 9, the entrywise
   step), over Coq's real numbers. If a head's weight p is within eps of the
   target weight a and eps < a, then p > 0 and
       |ln a - ln p| <= - ln (1 - eps / a),
   the eta_ij of the lower bound: the log-domain error of an entry is at most
   eta_ij whichever side p lies on.
   Checked numerically by: tests/reach/approximate.test.cpp, property "the
   entrywise bound is >= -log(1 - eps / a) (MPFR at 256 bits) ...".
   Used by include/attnrank/reach/approximate.hpp (detail::eta_norm_upper). *)
Require Import Reals Lra.
Open Scope R_scope.

Theorem log_error_bound (a p eps : R) :
  0 <= eps -> eps < a -> Rabs (p - a) <= eps ->
  0 < p /\ Rabs (ln a - ln p) <= - ln (1 - eps / a).
Proof.
intros He Hea Hp.
assert (Ha : 0 < a) by lra.
assert (Hlo : - eps <= p - a)
  by (destruct (Rle_or_lt 0 (p - a)); [rewrite Rabs_right in Hp; lra | rewrite Rabs_left in Hp; lra]).
assert (Hhi : p - a <= eps)
  by (destruct (Rle_or_lt 0 (p - a)); [rewrite Rabs_right in Hp; lra | rewrite Rabs_left in Hp; lra]).
assert (Hx0 : 0 <= eps / a) by (apply Rmult_le_pos; [lra | left; apply Rinv_0_lt_compat; lra]).
assert (Hx1 : eps / a < 1)
  by (apply (Rmult_lt_reg_r a); [lra | unfold Rdiv; rewrite Rmult_assoc, Rinv_l; lra]).
assert (Hp0 : 0 < p) by lra.
split; [exact Hp0 |].
assert (Hm : 0 < 1 - eps / a) by lra.
(* p >= a - eps = a (1 - eps / a): ln a - ln p <= - ln (1 - eps / a). *)
assert (Hup : ln a - ln p <= - ln (1 - eps / a)).
{ assert (Hfac : a - eps = a * (1 - eps / a)) by (field; lra).
  assert (H : ln (a - eps) <= ln p).
  { destruct (Req_dec (a - eps) p) as [E | N]; [rewrite E; lra | left; apply ln_increasing; lra]. }
  rewrite Hfac, ln_mult in H by lra; lra. }
(* p <= a + eps = a (1 + eps / a), and ln (1 - x) + ln (1 + x) = ln (1 - x^2) <= 0:
   ln a - ln p >= - ln (1 + eps / a) >= ln (1 - eps / a). *)
assert (Hdown : ln (1 - eps / a) <= ln a - ln p).
{ assert (Hfac : a + eps = a * (1 + eps / a)) by (field; lra).
  assert (H : ln p <= ln (a + eps)).
  { destruct (Req_dec p (a + eps)) as [E | N]; [rewrite E; lra | left; apply ln_increasing; lra]. }
  rewrite Hfac, ln_mult in H by lra.
  assert (Hsq : ln (1 - eps / a) + ln (1 + eps / a) <= 0).
  { rewrite <- ln_mult by lra; rewrite <- ln_1.
    destruct (Req_dec ((1 - eps / a) * (1 + eps / a)) 1) as [E | N]; [rewrite E; lra |].
    left; apply ln_increasing; nra. }
  lra. }
apply Rabs_le; lra.
Qed.
