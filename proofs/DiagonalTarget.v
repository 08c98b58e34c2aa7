(* Theorem 6 (Appendix A: the diagonal target; docs/math.md item 6).
   det (a I + b J) = a^(n-1) (a + n b) for n >= 1, over any commutative ring;
   so log A = a I + b J of the diagonal target has full rank when a != 0 and
   a + n b != 0, and log(A) C = a C has rank n - 1 when a != 0.
   Checked numerically by: tests/exact_rank.test.cpp, property "det(a I + b J) =
   a^(n-1) (a + n b), and the rank follows the eigenvalues", and
   tests/reach.test.cpp, property "diag:n:p is unreachable for every d_k <= n - 2
   and reachable at d_k = n - 1"; `attnrank appendix` prints both det forms
   (closed form and certified determinant) and checks they agree
   (tests/appendix_cli.test.cpp). *)
From mathcomp Require Import all_ssreflect all_algebra.
From Attnrank Require Import Subadditivity ExactFloor.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory.
Local Open Scope ring_scope.

Section Determinant.
Variable R : comRingType.

Local Notation J p q := (const_mx 1 : 'M[R]_(p, q)).

Lemma mulJJ p q r : J p q *m J q r = q%:R *: J p r.
Proof.
apply/matrixP => i j; rewrite !mxE.
under eq_bigr do rewrite !mxE mulr1.
by rewrite sumr_const card_ord mulr1.
Qed.

Lemma J11 : J 1 1 = 1%:M.
Proof. by apply/matrixP => i j; rewrite !ord1 !mxE. Qed.

(* a I + b J on 1 + n indices, cut after the first. *)
Lemma aIbJ_block n a b :
  (a%:M + b *: J (1 + n) (1 + n) : 'M[R]_(1 + n)) =
  block_mx (a%:M + b *: J 1 1) (b *: J 1 n) (b *: J n 1) (a%:M + b *: J n n).
Proof.
rewrite [a%:M]scalar_mx_block -[J (1 + n) (1 + n)]block_mx_const scale_block_mx add_block_mx.
by rewrite !add0r.
Qed.

(* Column operation: column 0 += every other column. Row operation: every other
   row -= row 0. Both unit triangular. *)
Definition col_op n : 'M[R]_(1 + n) := block_mx 1%:M 0 (J n 1) 1%:M.
Definition row_op n : 'M[R]_(1 + n) := block_mx 1%:M 0 (- J n 1) 1%:M.

Lemma det_col_op n : \det (col_op n) = 1.
Proof. by rewrite /col_op det_lblock !det1 mulr1. Qed.

Lemma det_row_op n : \det (row_op n) = 1.
Proof. by rewrite /row_op det_lblock !det1 mulr1. Qed.

Lemma scalar_sum (a b : R) n : a + b + b * n%:R = a + (1 + n)%:R * b.
Proof. by rewrite natrD mulrDl mulr1n mul1r [b * _]mulrC addrA. Qed.

(* The blocks of row_op * (a I + b J) * col_op, one at a time. *)
Lemma corner n a b :
  a%:M + b *: J 1 1 + b *: J 1 n *m J n 1 = (a + (1 + n)%:R * b)%:M.
Proof.
rewrite -scalemxAl mulJJ scalerA J11 !scalemx1 -!raddfD /=.
by rewrite scalar_sum.
Qed.

Lemma lower_left n a b :
  - J n 1 *m (a + (1 + n)%:R * b)%:M + (b *: J n 1 + (a%:M + b *: J n n) *m J n 1) = 0.
Proof.
rewrite mul_mx_scalar mulmxDl mul_scalar_mx -scalemxAl mulJJ scalerA scalerN.
rewrite -scaleNr -!scalerDl -scalar_sum.
suff -> : - (a + b + b * n%:R) + (b + (a + b * n%:R)) = 0 by rewrite scale0r.
by rewrite [b + (a + _)]addrA [b + a]addrC addNr.
Qed.

Lemma lower_right n a b :
  - J n 1 *m (b *: J 1 n) + (a%:M + b *: J n n) = a%:M.
Proof.
by rewrite mulNmx -scalemxAr mulJJ scalerA mulr1n mulr1 addrC addrK.
Qed.

Lemma triangularised n a b :
  row_op n *m ((a%:M + b *: J (1 + n) (1 + n)) *m col_op n) =
  block_mx ((a + (1 + n)%:R * b)%:M) (b *: J 1 n) 0 a%:M.
Proof.
rewrite aIbJ_block /col_op /row_op !mulmx_block.
rewrite !mulmx0 !mulmx1 !mul0mx !mul1mx !addr0 !add0r corner.
by rewrite lower_left lower_right.
Qed.

Theorem det_aI_bJ n a b :
  \det (a%:M + b *: J n.+1 n.+1) = a ^+ n * (a + n.+1%:R * b).
Proof.
have := congr1 determinant (triangularised n a b).
rewrite !det_mulmx det_row_op det_col_op mul1r mulr1 => ->.
by rewrite det_ublock det_scalar1 det_scalar mulrC add1n.
Qed.

End Determinant.

Section Ranks.
Variable F : fieldType.

Local Notation J p q := (const_mx 1 : 'M[F]_(p, q)).

(* log A = a I + b J has full rank when its determinant a^n (a + (n+1) b) is not 0. *)
Theorem rank_aI_bJ_full n a b : a != 0 -> a + n.+1%:R * b != 0 ->
  \rank (a%:M + b *: J n.+1 n.+1)%R = n.+1.
Proof.
move=> a0 ab0; apply: mxrank_unit; rewrite unitmxE.
rewrite det_aI_bJ unitfE.
by rewrite mulf_neq0 // expf_neq0.
Qed.

Lemma J_center n : n%:R != 0 :> F -> J n n *m center F n = 0.
Proof.
move=> nz; rewrite /center mulmxBr mulmx1 -scalemxAr.
have -> : J n n *m J n n = n%:R *: J n n.
  apply/matrixP => i j; rewrite !mxE; under eq_bigr do rewrite !mxE mulr1.
  by rewrite sumr_const card_ord mulr1.
by rewrite scalerA mulVf // scale1r subrr.
Qed.

(* rank C = n - 1 for n >= 1: 1^T C = 0 bounds it above (Sylvester), and
   I = C + J / n bounds it below (subadditivity, rank J = 1). *)
Theorem rank_center n : n.+1%:R != 0 :> F -> \rank (center F n.+1) = n.
Proof.
move=> nz.
have ones_nz : ones_row F n.+1 != 0.
  by apply/eqP => /matrixP /(_ 0 0); rewrite !mxE; apply/eqP; exact: oner_neq0.
apply/eqP; rewrite eqn_leq; apply/andP; split.
  have := mxrank_mul_min (ones_row F n.+1) (center F n.+1).
  rewrite ones_row_center // mxrank0 rank_rV ones_nz leqn0 subn_eq0 add1n.
  by [].
have splitI : (1%:M : 'M[F]_n.+1) = center F n.+1 + (n.+1%:R)^-1 *: J n.+1 n.+1.
  by rewrite /center subrK.
have rankJ : (\rank ((n.+1%:R)^-1 *: J n.+1 n.+1) <= 1)%N.
  rewrite -(ones_col_mul_row F n.+1) scalemxAl.
  exact: leq_trans (mxrankM_maxr _ _) (rank_leq_row _).
have := mxrank_add (center F n.+1) ((n.+1%:R)^-1 *: J n.+1 n.+1).
rewrite -splitI mxrank1 => /leq_trans /(_ (leq_add (leqnn _) rankJ)).
by rewrite addn1 ltnS.
Qed.

(* The diagonal target (n.+1%:R != 0 holds in characteristic 0, e.g. over the
   reals: ExactFloor.natr_neq0): log(A) C = (a I + b J) C = a C has rank n - 1 when a != 0,
   so its floor is n - 1 (Appendix A, "for a sentence of any length"). *)
Theorem rank_diagonal_floor n a b : n.+1%:R != 0 :> F -> a != 0 ->
  \rank ((a%:M + b *: J n.+1 n.+1)%R *m center F n.+1) = n.
Proof.
move=> nz a0.
rewrite mulmxDl -scalemxAl J_center // scaler0 addr0 mul_scalar_mx.
by rewrite mxrank_scale_nz // rank_center.
Qed.

End Ranks.
