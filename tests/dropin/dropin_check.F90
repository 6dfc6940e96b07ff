! The intercepted collectives from Fortran, as `use mpi` (USE_MPI_MODULE) or mpif.h programs
! call them, against the MPI library's own (PMPI_) in the same run: INTEGER, REAL and DOUBLE
! PRECISION with SUM, PROD, MIN, MAX; each root; MPI_IN_PLACE; counts 0, 1, p, 7, 1000.
! Prints "dropin_check: N cases, M different" on rank 0; stops with 1 when M > 0.
program dropin_check_fortran
#ifdef USE_MPI_MODULE
  use mpi
  implicit none
#else
  implicit none
  include 'mpif.h'
#endif
  integer, parameter :: nmax = 1000
  integer :: counts(5), ops(4), ierr, rank, p, k, n, oi, root, cases, different, total, i
  integer, allocatable :: isend(:), igot(:), iwant(:), blocks(:)
  double precision, allocatable :: dsend(:), dgot(:), dwant(:)
  real, allocatable :: rsend(:), rgot(:), rwant(:)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, p, ierr)
  counts = (/ 0, 1, p, 7, nmax /)
  ops = (/ MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX /)
  cases = 0
  different = 0
  allocate(isend(nmax * p), igot(nmax * p), iwant(nmax * p), blocks(p))
  allocate(dsend(nmax * p), dgot(nmax * p), dwant(nmax * p))
  allocate(rsend(nmax * p), rgot(nmax * p), rwant(nmax * p))

  do k = 1, 5
    n = counts(k)
    do oi = 1, 4
      do i = 1, nmax * p
        if (ops(oi) == MPI_PROD) then
          isend(i) = merge(2, 1, mod(rank * 7 + i * 3, 3) == 0)
        else
          isend(i) = mod(rank * 7 + i * 3, 11) - 5
        end if
      end do
      dsend = dble(isend)
      rsend = real(isend)
      igot = -99
      iwant = -99
      call MPI_ALLREDUCE(isend, igot, n, MPI_INTEGER, ops(oi), MPI_COMM_WORLD, ierr)
      call PMPI_ALLREDUCE(isend, iwant, n, MPI_INTEGER, ops(oi), MPI_COMM_WORLD, ierr)
      call check_int('MPI_ALLREDUCE integer')
      dgot = -99
      dwant = -99
      call MPI_ALLREDUCE(dsend, dgot, n, MPI_DOUBLE_PRECISION, ops(oi), MPI_COMM_WORLD, ierr)
      call PMPI_ALLREDUCE(dsend, dwant, n, MPI_DOUBLE_PRECISION, ops(oi), MPI_COMM_WORLD, ierr)
      call check_double('MPI_ALLREDUCE double precision')
      rgot = rsend
      rwant = rsend
      call MPI_ALLREDUCE(MPI_IN_PLACE, rgot, n, MPI_REAL, ops(oi), MPI_COMM_WORLD, ierr)
      call PMPI_ALLREDUCE(MPI_IN_PLACE, rwant, n, MPI_REAL, ops(oi), MPI_COMM_WORLD, ierr)
      call check_real('MPI_ALLREDUCE real in place')
      do root = 0, p - 1
        igot = -99
        iwant = -99
        call MPI_REDUCE(isend, igot, n, MPI_INTEGER, ops(oi), root, MPI_COMM_WORLD, ierr)
        call PMPI_REDUCE(isend, iwant, n, MPI_INTEGER, ops(oi), root, MPI_COMM_WORLD, ierr)
        call check_int('MPI_REDUCE integer')
      end do
      igot = -99
      iwant = -99
      call MPI_REDUCE_SCATTER_BLOCK(isend, igot, n, MPI_INTEGER, ops(oi), MPI_COMM_WORLD, ierr)
      call PMPI_REDUCE_SCATTER_BLOCK(isend, iwant, n, MPI_INTEGER, ops(oi), MPI_COMM_WORLD, ierr)
      call check_int('MPI_REDUCE_SCATTER_BLOCK integer')
      blocks = n
      dgot = dsend
      dwant = dsend
      call MPI_REDUCE_SCATTER(MPI_IN_PLACE, dgot, blocks, MPI_DOUBLE_PRECISION, ops(oi), &
                              MPI_COMM_WORLD, ierr)
      call PMPI_REDUCE_SCATTER(MPI_IN_PLACE, dwant, blocks, MPI_DOUBLE_PRECISION, ops(oi), &
                               MPI_COMM_WORLD, ierr)
      call check_double('MPI_REDUCE_SCATTER double precision in place')
    end do
    do root = 0, p - 1
      igot = isend
      iwant = isend
      call MPI_BCAST(igot, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
      call PMPI_BCAST(iwant, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
      call check_int('MPI_BCAST integer')
      igot = -99
      iwant = -99
      call MPI_GATHER(isend, n, MPI_INTEGER, igot, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
      call PMPI_GATHER(isend, n, MPI_INTEGER, iwant, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
      call check_int('MPI_GATHER integer')
      igot = -99
      iwant = -99
      call MPI_SCATTER(isend, n, MPI_INTEGER, igot, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
      call PMPI_SCATTER(isend, n, MPI_INTEGER, iwant, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
      call check_int('MPI_SCATTER integer')
    end do
    dgot = dsend
    dwant = dsend
    call MPI_ALLGATHER(MPI_IN_PLACE, n, MPI_DOUBLE_PRECISION, dgot, n, MPI_DOUBLE_PRECISION, &
                       MPI_COMM_WORLD, ierr)
    call PMPI_ALLGATHER(MPI_IN_PLACE, n, MPI_DOUBLE_PRECISION, dwant, n, MPI_DOUBLE_PRECISION, &
                        MPI_COMM_WORLD, ierr)
    call check_double('MPI_ALLGATHER double precision in place')
    rgot = -99
    rwant = -99
    call MPI_ALLTOALL(rsend, n, MPI_REAL, rgot, n, MPI_REAL, MPI_COMM_WORLD, ierr)
    call PMPI_ALLTOALL(rsend, n, MPI_REAL, rwant, n, MPI_REAL, MPI_COMM_WORLD, ierr)
    call check_real('MPI_ALLTOALL real')
  end do
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call PMPI_ALLREDUCE(different, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a, i0, a, i0, a)', 'dropin_check: ', cases, ' cases, ', total, ' different'
  call MPI_FINALIZE(ierr)
  if (total /= 0) stop 1

contains

  subroutine note(what, same)
    character(*), intent(in) :: what
    logical, intent(in) :: same
    cases = cases + 1
    if (.not. same) then
      different = different + 1
      print '(a, i0, a, a, a, i0)', 'rank ', rank, ': DIFFERENT ', what, ' count ', n
    end if
  end subroutine

  subroutine check_int(what)
    character(*), intent(in) :: what
    call note(what, all(igot == iwant))
  end subroutine

  subroutine check_double(what)
    character(*), intent(in) :: what
    call note(what, all(dgot == dwant))
  end subroutine

  subroutine check_real(what)
    character(*), intent(in) :: what
    call note(what, all(rgot == rwant))
  end subroutine
end program
