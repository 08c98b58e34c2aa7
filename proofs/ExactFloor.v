(* Theorem 3 (the exact floor; design.md "Floor, exact"; docs/math.md item 4).
   With C = I - (1/n) 1 1^T: for every c, rank (L C) <= rank (L + c 1^T), and
   c = -(1/n) L 1 attains it, so min over c of rank (L + c 1^T) = rank (L C).
   Needs n%:R != 0, i.e. n > 0 in characteristic 0 (corollaries for numFieldType).
   Checked numerically by: tests/exact_rank.test.cpp, property "rank(L + c 1^T)
   >= rank(L C), with equality at c = -L 1 / n (the exact floor)", and
   tests/reach.test.cpp, property "a target 2^E has floor exactly rank(E C):
   reachable there, unreachable one below". Used by every verdict of `reach`
   (include/attnrank/reach.hpp). *)
From mathcomp Require Import all_ssreflect all_algebra.
From Attnrank Require Import Subadditivity.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section ExactFloor.
Variable F : fieldType.

Definition ones_col n : 'cV[F]_n := const_mx 1.

(* The row-centering matrix C = I - J / n. *)
Definition center n : 'M[F]_n := 1%:M - (n%:R)^-1 *: const_mx 1.

Lemma ones_row_mulJ n : ones_row F n *m (const_mx 1 : 'M[F]_n) = n%:R *: ones_row F n.
Proof.
apply/rowP => j; rewrite !mxE.
under eq_bigr do rewrite !mxE mulr1.
by rewrite sumr_const card_ord mulr1.
Qed.

Lemma ones_col_mul_row n : ones_col n *m ones_row F n = const_mx 1.
Proof.
apply/matrixP => i j; rewrite !mxE big_ord1 !mxE.
by rewrite mulr1.
Qed.

(* 1^T C = 0: the centering kills every row constant. *)
Lemma ones_row_center n : n%:R != 0 :> F -> ones_row F n *m center n = 0.
Proof.
move=> nz; rewrite /center mulmxBr mulmx1 -scalemxAr ones_row_mulJ scalerA.
by rewrite mulVf // scale1r subrr.
Qed.

Lemma shifted_center n (L : 'M[F]_n) (c : 'cV[F]_n) : n%:R != 0 :> F ->
  (L + c *m ones_row F n) *m center n = L *m center n.
Proof. by move=> nz; rewrite mulmxDl -mulmxA ones_row_center // mulmx0 addr0. Qed.

Theorem exact_floor_le n (L : 'M[F]_n) (c : 'cV[F]_n) : n%:R != 0 :> F ->
  (\rank (L *m center n) <= \rank (L + c *m ones_row F n)%R)%N.
Proof. by move=> nz; rewrite -(shifted_center L c nz) mxrankM_maxl. Qed.

(* c = -(1/n) L 1 turns L + c 1^T into L C. *)
Definition floor_shift n (L : 'M[F]_n) : 'cV[F]_n := - ((n%:R)^-1 *: (L *m ones_col n)).

Lemma floor_shift_centers n (L : 'M[F]_n) : L + floor_shift L *m ones_row F n = L *m center n.
Proof.
rewrite /floor_shift /center mulmxBr mulmx1 mulNmx -scalemxAl -mulmxA ones_col_mul_row.
by rewrite scalemxAr.
Qed.

Theorem exact_floor_attained n (L : 'M[F]_n) :
  \rank (L + floor_shift L *m ones_row F n)%R = \rank (L *m center n).
Proof. by rewrite floor_shift_centers. Qed.

(* Hence the minimum over c of rank (L + c 1^T) is rank (L C). *)
Theorem exact_floor_min n (L : 'M[F]_n) : n%:R != 0 :> F ->
  (forall c : 'cV[F]_n, (\rank (L *m center n) <= \rank (L + c *m ones_row F n)%R)%N) /\
  exists c : 'cV[F]_n, \rank (L + c *m ones_row F n)%R = \rank (L *m center n).
Proof.
move=> nz; split; first by move=> c; exact: exact_floor_le.
by exists (floor_shift L); exact: exact_floor_attained.
Qed.

End ExactFloor.

(* In characteristic 0 (any numFieldType, e.g. the rationals or the reals) the
   side condition is just n > 0. *)
Section CharacteristicZero.
Variable R : numFieldType.

Lemma natr_neq0 n : (0 < n)%N -> n%:R != 0 :> R.
Proof. by rewrite pnatr_eq0 -lt0n. Qed.

Corollary exact_floor_min_num n (L : 'M[R]_n) : (0 < n)%N ->
  (forall c : 'cV[R]_n, (\rank (L *m center R n) <= \rank (L + c *m ones_row R n)%R)%N) /\
  exists c : 'cV[R]_n, \rank (L + c *m ones_row R n)%R = \rank (L *m center R n).
Proof. by move=> n0; apply: exact_floor_min; exact: natr_neq0. Qed.

End CharacteristicZero.
