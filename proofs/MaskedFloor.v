(* Theorem 9 (reachability under a mask; docs/math.md item 11, include/attnrank/reach/masked.hpp).
   Appending a row of ones adds exactly one to the rank of the centered matrix:
     rank [T; 1^T] = rank (T C) + 1                      (T : m x n, n%:R != 0),
   so by Theorem 3 min over c of rank (T + c 1^T) = rank [T; 1^T] - 1 for every
   completion T. With Omega the allowed set and L = log A on it: every admissible
   score matrix S (S = L + c 1^T on Omega) has rank S >= rank [T; 1^T] - 1 for the
   completion T = S - c 1^T of L, and every completion T of L attains
   rank [T; 1^T] - 1 with an admissible S. Hence
     floor_Omega = min over completions T of rank [T; 1^T] - 1 = mr([L; 1^T]) - 1.
   The staircase formula for mr (Woerdeman 1987) is cited, not proven here.
   Checked numerically by: tests/reach/masked.test.cpp, "generic causal targets
   have floor exactly floor(n / 2)", "a target a width-r head makes through a
   causal or prefix-LM mask: floor <= r ...", "the full mask answers as no mask". *)
From mathcomp Require Import all_ssreflect all_algebra.
From Attnrank Require Import Subadditivity ExactFloor.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section MaskedFloor.
Variable F : fieldType.

Lemma center_ones n : n%:R != 0 :> F -> center F n *m ones_col F n = 0.
Proof.
move=> nz; rewrite /center mulmxBl mul1mx -scalemxAl.
have -> : (const_mx 1 : 'M[F]_n) *m ones_col F n = n%:R *: ones_col F n.
  apply/colP => i; rewrite /ones_col !mxE.
  under eq_bigr do rewrite !mxE mulr1.
  by rewrite sumr_const card_ord mulr1.
by rewrite scalerA mulVf // scale1r subrr.
Qed.

Lemma center_idem n : n%:R != 0 :> F -> center F n *m center F n = center F n.
Proof.
move=> nz; rewrite {1}/center mulmxBl mul1mx -scalemxAl -(ones_col_mul_row F n) -mulmxA.
by rewrite ones_row_center // mulmx0 scaler0 subr0.
Qed.

Lemma ones_row_ones_col n : ones_row F n *m ones_col F n = n%:R%:M.
Proof.
apply/matrixP => i j; rewrite /ones_row /ones_col !mxE (ord1 i) (ord1 j) /=.
under eq_bigr do rewrite !mxE mulr1.
by rewrite sumr_const card_ord mulr1n.
Qed.

(* rank [T C; 1^T] >= rank (T C) + 1: multiply by [C, 1/n]. *)
Lemma rank_centered_ones_ge m n (T : 'M[F]_(m, n)) : n%:R != 0 :> F ->
  ((\rank (T *m center F n)).+1 <= \rank (col_mx (T *m center F n) (ones_row F n)))%N.
Proof.
move=> nz.
pose W := row_mx (center F n) ((n%:R)^-1 *: ones_col F n).
have -> : (\rank (T *m center F n)).+1 = \rank (block_mx (T *m center F n) 0 0 (1%:M : 'M[F]_1)).
  by rewrite rank_diag_block_mx mxrank1 addn1.
have <- : col_mx (T *m center F n) (ones_row F n) *m W
          = block_mx (T *m center F n) 0 0 (1%:M : 'M[F]_1).
  rewrite mul_col_row -mulmxA center_idem // -!scalemxAr -mulmxA center_ones // mulmx0 scaler0.
  by rewrite ones_row_center // ones_row_ones_col scale_scalar_mx mulVf.
exact: mxrankM_maxl.
Qed.

(* rank [X; 1^T] <= rank X + 1 for any X. *)
Lemma rank_ones_appended_le m n (X : 'M[F]_(m, n)) :
  (\rank (col_mx X (ones_row F n)) <= (\rank X).+1)%N.
Proof.
have -> : col_mx X (ones_row F n) = col_mx X 0 + col_mx 0 (ones_row F n).
  by rewrite add_col_mx addr0 add0r.
apply: leq_trans (rank_subadditive _ _) _.
by rewrite rank_col_mx0 rank_col_0mx -[(\rank X).+1]addn1 leq_add2l rank_leq_row.
Qed.

(* [T; 1^T] and [T C; 1^T] have the same rank: each is the other times a block
   matrix [[1, +-a], [0, 1]] with a = T 1 / n. *)
Lemma rank_ones_appended_center m n (T : 'M[F]_(m, n)) :
  \rank (col_mx T (ones_row F n)) = \rank (col_mx (T *m center F n) (ones_row F n)).
Proof.
pose a := (n%:R)^-1 *: (T *m ones_col F n).
have split : T = T *m center F n + a *m ones_row F n.
  rewrite /a /center mulmxBr mulmx1 -scalemxAl -mulmxA ones_col_mul_row -scalemxAr.
  by rewrite subrK.
have up : col_mx T (ones_row F n)
          = block_mx 1%:M a 0 1%:M *m col_mx (T *m center F n) (ones_row F n).
  by rewrite mul_block_col !mul1mx mul0mx add0r -split.
have down : col_mx (T *m center F n) (ones_row F n)
            = block_mx 1%:M (- a) 0 1%:M *m col_mx T (ones_row F n).
  by rewrite mul_block_col !mul1mx mul0mx add0r mulNmx {2}split addrK.
apply/eqP; rewrite eqn_leq; apply/andP; split.
  by rewrite {1}up mxrankM_maxr.
by rewrite {1}down mxrankM_maxr.
Qed.

Theorem rank_ones_appended m n (T : 'M[F]_(m, n)) : n%:R != 0 :> F ->
  \rank (col_mx T (ones_row F n)) = (\rank (T *m center F n)).+1.
Proof.
move=> nz; rewrite rank_ones_appended_center; apply/eqP; rewrite eqn_leq.
by rewrite rank_ones_appended_le rank_centered_ones_ge.
Qed.

(* Hence, for a square completion T, min over c of rank (T + c 1^T) = rank [T; 1^T] - 1. *)
Corollary ones_appended_floor n (T : 'M[F]_n) : n%:R != 0 :> F ->
  (forall c : 'cV[F]_n, ((\rank (col_mx T (ones_row F n))).-1 <= \rank (T + c *m ones_row F n)%R)%N) /\
  exists c : 'cV[F]_n, \rank (T + c *m ones_row F n)%R = (\rank (col_mx T (ones_row F n))).-1.
Proof. by move=> nz; rewrite rank_ones_appended //=; exact: exact_floor_min. Qed.

(* The mask. Omega i j holds where query i may attend to key j; S is admissible
   for L when S = L + c 1^T on Omega (elsewhere the score is -inf: unconstrained). *)
Definition agrees_on n (Omega : 'I_n -> 'I_n -> bool) (S L : 'M[F]_n) :=
  forall i j, Omega i j -> S i j = L i j.

Theorem masked_floor_le n (Omega : 'I_n -> 'I_n -> bool) (L S : 'M[F]_n) (c : 'cV[F]_n) :
  n%:R != 0 :> F -> agrees_on Omega S (L + c *m ones_row F n) ->
  exists T, agrees_on Omega T L /\ ((\rank (col_mx T (ones_row F n))).-1 <= \rank S)%N.
Proof.
move=> nz hS; exists (S - c *m ones_row F n); split.
  by move=> i j Oij; rewrite !mxE (hS i j Oij) !mxE addrK.
by have [le _] := ones_appended_floor (S - c *m ones_row F n) nz; rewrite -{2}(subrK (c *m ones_row F n) S) le.
Qed.

Theorem masked_floor_attained n (Omega : 'I_n -> 'I_n -> bool) (L T : 'M[F]_n) :
  n%:R != 0 :> F -> agrees_on Omega T L ->
  exists (S : 'M[F]_n) (c : 'cV[F]_n), agrees_on Omega S (L + c *m ones_row F n) /\
    \rank S = (\rank (col_mx T (ones_row F n))).-1.
Proof.
move=> nz hT; have [_ [c hc]] := ones_appended_floor T nz.
exists (T + c *m ones_row F n), c; split => //.
by move=> i j Oij; rewrite mxE (hT i j Oij) [RHS]mxE.
Qed.

End MaskedFloor.
