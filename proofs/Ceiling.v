(* Theorem 1 (the ceiling; tutorial Equation 2-5 and 2-6).
   For X with d columns and Y with d rows, rank (X Y) <= d; hence the scores of a
   head of width d_k, Q K^T with Q, K of d_k columns, have rank at most d_k.
   Checked numerically by: tests/exact_rank.test.cpp, property "rank(X Y) <=
   inner dimension, with equality when both factors have full rank (Eq. 2-5)",
   and tests/layer_structure.property.cpp, property "head i's raw scores are
   Q_i K_i^T, of rank at most d_k". Used by every `unreachable` verdict. *)
From mathcomp Require Import all_ssreflect all_algebra.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory.
Local Open Scope ring_scope.

Section Ceiling.
Variable F : fieldType.

(* Equation 2-5: every row of X Y is a combination of the d rows of Y. *)
Theorem rank_mul_le_inner m d n (X : 'M[F]_(m, d)) (Y : 'M[F]_(d, n)) :
  (\rank (X *m Y) <= d)%N.
Proof. exact: leq_trans (mxrankM_maxl X Y) (rank_leq_col X). Qed.

(* Equation 2-6: the score matrix of a head of width dk. *)
Theorem rank_scores_le_dk n dk (Q K : 'M[F]_(n, dk)) :
  (\rank (Q *m K^T) <= dk)%N.
Proof. exact: rank_mul_le_inner. Qed.

(* Scaling by 1 / sqrt(d_k) does not change the bound. *)
Theorem rank_scaled_scores_le_dk n dk (s : F) (Q K : 'M[F]_(n, dk)) :
  (\rank (s *: (Q *m K^T)) <= dk)%N.
Proof. exact: leq_trans (mxrank_scale _ _) (rank_scores_le_dk Q K). Qed.

End Ceiling.
