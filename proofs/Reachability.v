(* Theorem 7 (the decision the engine implements; include/attnrank/reach.hpp,
   docs/math.md item 5). With L = log A and C the row-centering matrix:
   - if rank (L C) <= dk, there are Q, K with dk columns and a row shift c with
     Q K^T = L + c 1^T (then softmax (Q K^T) = A: SoftmaxInversion.v; the factor
     1 / sqrt dk is absorbed by scaling K);
   - if dk < rank (L C), no Q, K with dk columns and no c give Q K^T = L + c 1^T.
   Checked numerically by: tests/reach.test.cpp, properties "diag:n:p is
   unreachable for every d_k <= n - 2 and reachable at d_k = n - 1", "a target
   2^E has floor exactly rank(E C): reachable there, unreachable one below" and
   "every certificate is accepted by the checker, and witnesses meet their
   bounds" (the witness of a `reachable` verdict is this construction, from a
   truncated SVD instead of a rank factorisation). *)
From mathcomp Require Import all_ssreflect all_algebra.
From Attnrank Require Import Ceiling Subadditivity ExactFloor.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory.
Local Open Scope ring_scope.

Section Reachability.
Variable F : fieldType.

(* A rank factorisation padded to dk columns: any A of rank <= dk is Q K^T. *)
Lemma factor_through_width m n dk (A : 'M[F]_(m, n)) : (\rank A <= dk)%N ->
  exists (Q : 'M[F]_(m, dk)) (K : 'M[F]_(n, dk)), Q *m K^T = A.
Proof.
move=> le_r_dk.
exists (col_base A *m pid_mx (\rank A)), ((pid_mx (\rank A) *m row_base A)^T).
rewrite trmxK mulmxA -[col_base A *m _ *m _]mulmxA pid_mx_id //.
by rewrite pid_mx_1 mulmx1 mulmx_base.
Qed.

Theorem reachable_if_floor_le n dk (L : 'M[F]_n) : n%:R != 0 :> F ->
  (\rank (L *m center F n) <= dk)%N ->
  exists (Q K : 'M[F]_(n, dk)) (c : 'cV[F]_n), Q *m K^T = L + c *m ones_row F n.
Proof.
move=> _ le_floor; have [Q [K QK]] := factor_through_width le_floor.
by exists Q, K, (floor_shift L); rewrite floor_shift_centers.
Qed.

Theorem unreachable_if_floor_gt n dk (L : 'M[F]_n) : n%:R != 0 :> F ->
  (dk < \rank (L *m center F n))%N ->
  forall (Q K : 'M[F]_(n, dk)) (c : 'cV[F]_n), Q *m K^T != L + c *m ones_row F n.
Proof.
move=> nz gt_floor Q K c; apply/eqP => QK.
have := leq_trans (exact_floor_le L c nz) (eq_leq (congr1 mxrank (esym QK))).
by move/(leq_trans)/(_ (rank_scores_le_dk Q K)); rewrite leqNgt gt_floor.
Qed.

(* The verdict is exactly the comparison of the floor with dk. *)
Corollary reachable_iff_floor_le n dk (L : 'M[F]_n) : n%:R != 0 :> F ->
  (exists (Q K : 'M[F]_(n, dk)) (c : 'cV[F]_n), Q *m K^T = L + c *m ones_row F n) <->
  (\rank (L *m center F n) <= dk)%N.
Proof.
move=> nz; split; last exact: reachable_if_floor_le.
case=> Q [K [c QK]]; rewrite leqNgt; apply/negP => gt_floor.
by move: (unreachable_if_floor_gt nz gt_floor Q K c); rewrite QK eqxx.
Qed.

End Reachability.
