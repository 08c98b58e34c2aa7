(* Theorem 2 (tutorial Equation 2-8 and Step B of Appendix A).
   rank (X + Y) <= rank X + rank Y; rank (c 1^T) <= 1; hence the tutorial's floor
   rank L - 1 <= rank (L + c 1^T) for every c.
   Checked numerically by: tests/exact_rank.test.cpp, properties "rank(X + Y)
   <= rank X + rank Y (Eq. 2-8)", "rank(c 1^T) <= 1, with equality iff c != 0"
   and "rank(L + c 1^T) >= rank(L) - 1 (the tutorial's floor, Step B)". *)
From mathcomp Require Import all_ssreflect all_algebra.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory.
Local Open Scope ring_scope.

Section Subadditivity.
Variable F : fieldType.

(* The all-ones row 1^T. *)
Definition ones_row n : 'rV[F]_n := const_mx 1.

Theorem rank_subadditive m n (X Y : 'M[F]_(m, n)) :
  (\rank (X + Y)%R <= \rank X + \rank Y)%N.
Proof. exact: mxrank_add. Qed.

(* Every column of c 1^T is c. *)
Theorem rank_row_constant_le1 n (c : 'cV[F]_n) : (\rank (c *m ones_row n) <= 1)%N.
Proof. exact: leq_trans (mxrankM_maxr c _) (rank_leq_row _). Qed.

(* Step B: L = (L + c 1^T) + (- c 1^T). *)
Theorem seed_floor n (L : 'M[F]_n) (c : 'cV[F]_n) :
  (\rank L <= \rank (L + c *m ones_row n)%R + 1)%N.
Proof.
have split : L = ((L + c *m ones_row n) + - (c *m ones_row n))%R by rewrite addrK.
rewrite [X in (\rank X <= _)%N]split.
apply: leq_trans (rank_subadditive (L + c *m ones_row n) (- (c *m ones_row n))) _.
by rewrite leq_add2l mxrank_opp rank_row_constant_le1.
Qed.

(* The tutorial's form: rank S >= rank (log A) - 1 for S = log A + c 1^T. *)
Corollary seed_floor_sub n (L : 'M[F]_n) (c : 'cV[F]_n) :
  (\rank L - 1 <= \rank (L + c *m ones_row n)%R)%N.
Proof. by rewrite leq_subLR addnC seed_floor. Qed.

End Subadditivity.
