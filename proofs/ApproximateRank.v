(* Theorem 8a (the approximate question; docs/math.md item 9, the lemma's rank
   step). For any selection or centering on either side -- rows R, columns J
   and the centering C_J of the lower bound -- rank (R S C) <= rank S, so a
   score matrix of rank <= d_k leaves S_RJ C_J of rank <= d_k. Weyl's inequality
   for singular values, the other step of the lemma, is cited in docs/math.md,
   not proven here.
   Checked numerically by: tests/reach/approximate.test.cpp, property
   "error_lower <= (the generating head's certified error) ...".
   Used by include/attnrank/reach/approximate.hpp (error_lower). *)
From mathcomp Require Import all_ssreflect all_algebra.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Local Open Scope ring_scope.

Section ApproximateRank.
Variable F : fieldType.

Theorem rank_sandwich_le m n p q (R : 'M[F]_(p, m)) (S : 'M[F]_(m, n)) (C : 'M[F]_(n, q)) :
  (\rank (R *m S *m C) <= \rank S)%N.
Proof. by rewrite (leq_trans (mxrankM_maxl _ _)) // mxrankM_maxr. Qed.

(* With rank S <= d_k, the selected and centered block has rank <= d_k. *)
Theorem centered_block_rank_le m n p q (R : 'M[F]_(p, m)) (S : 'M[F]_(m, n)) (C : 'M[F]_(n, q)) dk :
  (\rank S <= dk)%N -> (\rank (R *m S *m C) <= dk)%N.
Proof. by move=> h; exact: leq_trans (rank_sandwich_le R S C) h. Qed.

End ApproximateRank.
