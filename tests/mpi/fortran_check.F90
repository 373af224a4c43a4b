! The MPI layer from Fortran: every collective the layer serves, on MPI_COMM_WORLD and on a split
! communicator, with Fortran's types, MPI_IN_PLACE, LOGICAL, 2INTEGER and 2DOUBLE_PRECISION with
! their ops and a non-commutative user op, derived types built in Fortran, MPI_ALLOC_MEM's memory,
! each result checked against a reference from the inputs. Each rank prints a digest of its results, so runs with and without the layer compare
! (run_mpi_layer_test.sh).
! Built three ways from this file: -DUSE_F08 (use mpi_f08), -DUSE_MPIF_H (include 'mpif.h'),
! neither (use mpi).
#if defined(USE_F08)
#define HANDLE(kind) type(kind)
#define IERR
#define IERR_ONLY
#else
#define HANDLE(kind) integer
#define IERR , ierr
#define IERR_ONLY ierr
#endif

module checks
#if defined(USE_F08)
  use mpi_f08
#elif !defined(USE_MPIF_H)
  use mpi
#endif
  implicit none
#if defined(USE_MPIF_H)
  include 'mpif.h'
#endif
  integer, parameter :: n = 13
  integer :: failures = 0
  integer(8) :: digest = 0
  integer :: ierr
contains
  subroutine check(good, what)
    logical, intent(in) :: good
    character(*), intent(in) :: what
    if (.not. good) then
      failures = failures + 1
      write (0, '(a, a)') 'check failed: ', what
    end if
  end subroutine

  subroutine absorb(values)
    integer, intent(in) :: values(:)
    integer :: i
    do i = 1, size(values)
      digest = mod(digest * 31 + values(i), 1000000007_8)
    end do
  end subroutine

  integer function input(rank, i)
    integer, intent(in) :: rank, i
    input = mod(rank * 13 + i * 7, 11) - 5
  end function

  subroutine check_all(comm)
    HANDLE(MPI_Comm), intent(in) :: comm
    integer :: rank, size, r, i, j, root
    integer :: a(n), b(n), want(n)
    integer, allocatable :: many(:), gathered(:), counts(:), displs(:)
    double precision :: x(n), y(n)
    real :: s(n), t(n)
    logical :: l(n), every(n), want_all
    integer :: pairs(2, n), best(2, n)
    double precision :: dpairs(2, n)
    HANDLE(MPI_Op) :: chain
    HANDLE(MPI_Datatype), allocatable :: types(:)
#if !defined(USE_F08)
    external keep_first
#endif

    call MPI_Comm_rank(comm, rank IERR)
    call MPI_Comm_size(comm, size IERR)
    root = size - 1
    do i = 1, n
      a(i) = input(rank, i)
    end do

    call MPI_Barrier(comm IERR)

    ! allreduce: DOUBLE PRECISION sum, in place; INTEGER max; LOGICAL and; 2INTEGER maxloc
    x = dble(a) * 0.25d0
    call MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm IERR)
    do i = 1, n
      want(i) = 0
      do r = 0, size - 1
        want(i) = want(i) + input(r, i)
      end do
    end do
    call check(all_equal(x, dble(want) * 0.25d0), 'allreduce double precision in place')
    call absorb(nint(x * 4))
    call MPI_Allreduce(a, b, n, MPI_INTEGER, MPI_MAX, comm IERR)
    do i = 1, n
      want(i) = maxval([(input(r, i), r = 0, size - 1)])
    end do
    call check(all(b == want), 'allreduce integer max')
    call absorb(b)
    l = a > 0
    call MPI_Allreduce(l, every, n, MPI_LOGICAL, MPI_LAND, comm IERR)
    do i = 1, n
      want_all = .true.
      do r = 0, size - 1
        want_all = want_all .and. input(r, i) > 0
      end do
      call check(every(i) .eqv. want_all, 'allreduce logical and')
    end do
    pairs(1, :) = a / 3
    pairs(2, :) = rank
    call MPI_Allreduce(pairs, best, n, MPI_2INTEGER, MPI_MAXLOC, comm IERR)
    do i = 1, n
      j = maxloc([(input(r, i) / 3, r = 0, size - 1)], 1) - 1
      call check(best(1, i) == input(j, i) / 3 .and. best(2, i) == j, 'allreduce 2integer maxloc')
    end do
    call absorb(reshape(best, [2 * n]))
    dpairs(1, :) = dble(a / 3)
    dpairs(2, :) = dble(rank)
    call MPI_Allreduce(MPI_IN_PLACE, dpairs, n, MPI_2DOUBLE_PRECISION, MPI_MINLOC, comm IERR)
    do i = 1, n
      j = minloc([(input(r, i) / 3, r = 0, size - 1)], 1) - 1
      call check(dpairs(1, i) == dble(input(j, i) / 3) .and. dpairs(2, i) == dble(j), &
        'allreduce 2double_precision minloc in place')
    end do
    call absorb(nint(reshape(dpairs, [2 * n])))

    ! reduce: REAL sum to the last rank; a non-commutative user op, in rank order
    s = real(a) * 0.5
    call MPI_Reduce(s, t, n, MPI_REAL, MPI_SUM, root, comm IERR)
    if (rank == root) then
      do i = 1, n
        want(i) = sum([(input(r, i), r = 0, size - 1)])
      end do
      call check(all(t == real(want) * 0.5), 'reduce real sum')
      call absorb(nint(t * 2))
    end if
    call MPI_Op_create(keep_first, .false., chain IERR)
    b = [(100 * rank + i, i = 1, n)]
    call MPI_Allreduce(MPI_IN_PLACE, b, n, MPI_INTEGER, chain, comm IERR)
    call check(all(b == [(i, i = 1, n)]), 'allreduce with a non-commutative user op')
    call absorb(b)
    call MPI_Op_free(chain IERR)

    ! reduce_local, scan, exscan, reduce_scatter_block, reduce_scatter
    b = a
    call MPI_Reduce_local(a, b, n, MPI_INTEGER, MPI_SUM IERR)
    call check(all(b == 2 * a), 'reduce_local')
    call MPI_Scan(a, b, n, MPI_INTEGER, MPI_SUM, comm IERR)
    do i = 1, n
      want(i) = sum([(input(r, i), r = 0, rank)])
    end do
    call check(all(b == want), 'scan')
    call absorb(b)
    call MPI_Exscan(a, b, n, MPI_INTEGER, MPI_SUM, comm IERR)
    if (rank > 0) then
      do i = 1, n
        want(i) = sum([(input(r, i), r = 0, rank - 1)])
      end do
      call check(all(b == want), 'exscan')
      call absorb(b)
    end if
    allocate (many(2 * size), gathered(2 * size), counts(size), displs(size))
    do i = 1, 2 * size
      many(i) = input(rank, i)
    end do
    call MPI_Reduce_scatter_block(many, b, 2, MPI_INTEGER, MPI_SUM, comm IERR)
    do i = 1, 2
      want(i) = sum([(input(r, 2 * rank + i), r = 0, size - 1)])
    end do
    call check(all(b(1:2) == want(1:2)), 'reduce_scatter_block')
    counts = 2
    call MPI_Reduce_scatter(many, b, counts, MPI_INTEGER, MPI_SUM, comm IERR)
    call check(all(b(1:2) == want(1:2)), 'reduce_scatter')
    call absorb(b(1:2))

    ! bcast, scatter(v), gather(v), allgather(v), alltoall(v/w): two integers per rank
    b = a
    call MPI_Bcast(b, n, MPI_INTEGER, root, comm IERR)
    call check(all(b == [(input(root, i), i = 1, n)]), 'bcast')
    do i = 1, 2 * size
      many(i) = 1000 * rank + i
    end do
    do r = 1, size
      displs(r) = 2 * (r - 1)
    end do
    call MPI_Scatter(many, 2, MPI_INTEGER, b, 2, MPI_INTEGER, root, comm IERR)
    call check(all(b(1:2) == [1000 * root + 2 * rank + 1, 1000 * root + 2 * rank + 2]), 'scatter')
    call MPI_Scatterv(many, counts, displs, MPI_INTEGER, b, 2, MPI_INTEGER, root, comm IERR)
    call check(all(b(1:2) == [1000 * root + 2 * rank + 1, 1000 * root + 2 * rank + 2]), 'scatterv')
    call MPI_Gather(many, 2, MPI_INTEGER, gathered, 2, MPI_INTEGER, root, comm IERR)
    if (rank == root) call check(all(gathered == [((1000 * (i / 2) + mod(i, 2) + 1, &
      i = 2 * r, 2 * r + 1), r = 0, size - 1)]), 'gather')
    call MPI_Gatherv(many, 2, MPI_INTEGER, gathered, counts, displs, MPI_INTEGER, root, comm IERR)
    if (rank == root) call check(all(gathered == [((1000 * (i / 2) + mod(i, 2) + 1, &
      i = 2 * r, 2 * r + 1), r = 0, size - 1)]), 'gatherv')
    call MPI_Allgather(many, 2, MPI_INTEGER, gathered, 2, MPI_INTEGER, comm IERR)
    call check(all(gathered == [((1000 * (i / 2) + mod(i, 2) + 1, i = 2 * r, 2 * r + 1), &
      r = 0, size - 1)]), 'allgather')
    call absorb(gathered)
    call MPI_Allgatherv(many, 2, MPI_INTEGER, gathered, counts, displs, MPI_INTEGER, comm IERR)
    call check(all(gathered == [((1000 * (i / 2) + mod(i, 2) + 1, i = 2 * r, 2 * r + 1), &
      r = 0, size - 1)]), 'allgatherv')
    call MPI_Alltoall(many, 2, MPI_INTEGER, gathered, 2, MPI_INTEGER, comm IERR)
    call check(all(gathered == [((1000 * r + 2 * rank + i, i = 1, 2), r = 0, size - 1)]), &
      'alltoall')
    call absorb(gathered)
    gathered = many
    call MPI_Alltoall(MPI_IN_PLACE, 2, MPI_INTEGER, gathered, 2, MPI_INTEGER, comm IERR)
    call check(all(gathered == [((1000 * r + 2 * rank + i, i = 1, 2), r = 0, size - 1)]), &
      'alltoall in place')
    call MPI_Alltoallv(many, counts, displs, MPI_INTEGER, gathered, counts, displs, &
      MPI_INTEGER, comm IERR)
    call check(all(gathered == [((1000 * r + 2 * rank + i, i = 1, 2), r = 0, size - 1)]), &
      'alltoallv')
    allocate (types(size))
    types = MPI_INTEGER
    call MPI_Alltoallw(many, counts, displs * 4, types, gathered, counts, displs * 4, types, &
      comm IERR)
    call check(all(gathered == [((1000 * r + 2 * rank + i, i = 1, 2), r = 0, size - 1)]), &
      'alltoallw')
    call absorb(gathered)
  end subroutine

  ! Derived types built in Fortran: a contiguous pair, every other DOUBLE PRECISION, and a matrix
  ! row (a vector resized to one element, so rank r's pair lands in row r + 1).
  ! MPI_BOTTOM with a struct type of absolute addresses (MPI_GET_ADDRESS): scattered variables
  ! broadcast as one message, blocking and nonblocking. VOLATILE: the calls name no buffer, so the
  ! compiler must not keep the variables in registers across them.
  subroutine check_bottom(comm)
    HANDLE(MPI_Comm), intent(in) :: comm
    HANDLE(MPI_Datatype) :: scattered, types(2)
    HANDLE(MPI_Request) :: request
    integer :: rank, size, root, round, lengths(2)
    integer, volatile :: first(3)
    double precision, volatile :: second(2)
    integer(kind=MPI_ADDRESS_KIND) :: addresses(2)

    call MPI_Comm_rank(comm, rank IERR)
    call MPI_Comm_size(comm, size IERR)
    call MPI_Get_address(first, addresses(1) IERR)
    call MPI_Get_address(second, addresses(2) IERR)
    lengths = [3, 2]
    types = [MPI_INTEGER, MPI_DOUBLE_PRECISION]
    call MPI_Type_create_struct(2, lengths, addresses, types, scattered IERR)
    call MPI_Type_commit(scattered IERR)
    do round = 0, 1
      root = mod(size - 1 + round, size)
      if (rank == root) then
        first = [7, 8, 9] + round
        second = [0.5d0, 1.5d0] + round
      else
        first = -1
        second = -1d0
      end if
      if (round == 0) then
        call MPI_Bcast(MPI_BOTTOM, 1, scattered, root, comm IERR)
      else
        call MPI_Ibcast(MPI_BOTTOM, 1, scattered, root, comm, request IERR)
        call MPI_Wait(request, MPI_STATUS_IGNORE IERR)
      end if
      call check(all(first == [7, 8, 9] + round) .and. all(second == [0.5d0, 1.5d0] + round), &
                 'bcast and ibcast from MPI_BOTTOM of a struct of absolute addresses')
      call absorb(first)
    end do
    call MPI_Type_free(scattered IERR)
  end subroutine

  subroutine check_derived(comm)
    HANDLE(MPI_Comm), intent(in) :: comm
    HANDLE(MPI_Datatype) :: pair, every_other, row_vector, row
    integer :: rank, size, r, i, root, stride
    integer :: mine(2)
    integer, allocatable :: pairs(:), matrix(:, :)
    double precision :: spread(2 * n)
    integer(kind=MPI_ADDRESS_KIND) :: lb, extent

    call MPI_Comm_rank(comm, rank IERR)
    call MPI_Comm_size(comm, size IERR)
    root = size - 1
    allocate (pairs(2 * size), matrix(size, 2))
    mine = [100 * rank + 1, 100 * rank + 2]

    call MPI_Type_contiguous(2, MPI_INTEGER, pair IERR)
    call MPI_Type_commit(pair IERR)
    call MPI_Allgather(mine, 1, pair, pairs, 1, pair, comm IERR)
    call check(all(pairs == [((100 * r + i, i = 1, 2), r = 0, size - 1)]), 'allgather of a pair')
    call absorb(pairs)

    call MPI_Type_vector(n, 1, 2, MPI_DOUBLE_PRECISION, every_other IERR)
    call MPI_Type_commit(every_other IERR)
    spread = -1d0
    if (rank == root) spread = [(dble(i), i = 1, 2 * n)]
    call MPI_Bcast(spread, 1, every_other, root, comm IERR)
    do i = 1, 2 * n
      if (mod(i, 2) == 1 .or. rank == root) then
        call check(spread(i) == dble(i), 'bcast of every other double precision')
      else
        call check(spread(i) == -1d0, 'bcast of every other: the gaps untouched')
      end if
    end do

    ! Strided array sections, the stride changing from call to call: MPICH's mpi_f08 passes each
    ! as a type of its own that it frees after the call, and the next one gets the freed handle.
    do stride = 2, 4
      spread = -1d0
      if (rank == root) spread = [(dble(i + stride), i = 1, 2 * n)]
      call MPI_Bcast(spread(1:2 * n:stride), (2 * n - 1) / stride + 1, MPI_DOUBLE_PRECISION, root, &
                     comm IERR)
      do i = 1, 2 * n
        if (mod(i - 1, stride) == 0 .or. rank == root) then
          call check(spread(i) == dble(i + stride), 'bcast of a strided section')
        else
          call check(spread(i) == -1d0, 'bcast of a strided section: the gaps untouched')
        end if
      end do
    end do

    call MPI_Type_vector(2, 1, size, MPI_INTEGER, row_vector IERR)
    lb = 0
    extent = 4
    call MPI_Type_create_resized(row_vector, lb, extent, row IERR)
    call MPI_Type_commit(row IERR)
    matrix = 0
    call MPI_Gather(mine, 2, MPI_INTEGER, matrix, 1, row, root, comm IERR)
    if (rank == root) then
      do r = 0, size - 1
        call check(all(matrix(r + 1, :) == [100 * r + 1, 100 * r + 2]), 'gather into matrix rows')
      end do
      call absorb(reshape(matrix, [2 * size]))
    end if

    call MPI_Type_free(pair IERR)
    call MPI_Type_free(every_other IERR)
    call MPI_Type_free(row_vector IERR)
    call MPI_Type_free(row IERR)
  end subroutine

  ! Nonblocking collectives completed by wait, waitall, waitany, testall and test.
  subroutine check_nonblocking(comm)
    HANDLE(MPI_Comm), intent(in) :: comm
    HANDLE(MPI_Request) :: requests(3)
    integer :: rank, size, r, i, index, round
    integer :: a(n), b(n), c(n), want(n)
    logical :: done
    call MPI_Comm_rank(comm, rank IERR)
    call MPI_Comm_size(comm, size IERR)
    do round = 1, 4
      a = [(input(rank, i) + round, i = 1, n)]
      want = 0
      do r = 0, size - 1
        want = want + [(input(r, i) + round, i = 1, n)]
      end do
      call MPI_Iallreduce(a, b, n, MPI_INTEGER, MPI_SUM, comm, requests(1) IERR)
      call MPI_Wait(requests(1), MPI_STATUS_IGNORE IERR)
      call check(all(b == want), 'iallreduce and wait')
      call absorb(b)
      c = -1
      if (rank == 0) c = a
      call MPI_Ibcast(c, n, MPI_INTEGER, 0, comm, requests(1) IERR)
      call MPI_Iallreduce(a, b, n, MPI_INTEGER, MPI_SUM, comm, requests(2) IERR)
      call MPI_Ibarrier(comm, requests(3) IERR)
      if (round == 1) then
        call MPI_Waitall(3, requests, MPI_STATUSES_IGNORE IERR)
      else if (round == 2) then
        do i = 1, 3
          call MPI_Waitany(3, requests, index, MPI_STATUS_IGNORE IERR)
          ! (1-based as the standard has it; MPICH 4.0.2's mpi_f08 returns C's 0-based index)
          call check(index >= 0 .and. index <= 3, 'waitany index')
        end do
      else if (round == 3) then
        done = .false.
        do while (.not. done)
          call MPI_Testall(3, requests, done, MPI_STATUSES_IGNORE IERR)
        end do
      else
        do i = 1, 3
          done = .false.
          do while (.not. done)
            call MPI_Test(requests(i), done, MPI_STATUS_IGNORE IERR)
          end do
        end do
      end if
      call check(all(c == [(input(0, i) + round, i = 1, n)]), 'ibcast')
      call check(all(b == want), 'iallreduce among others')
      call absorb(c)
    end do
  end subroutine

  ! MPI_ALLOC_MEM's memory (the layer's shared pages, with it) in an alltoall and an allreduce:
  ! allocated, used fresh and freed, twice.
  subroutine check_alloc_mem(comm)
    use, intrinsic :: iso_c_binding, only: c_ptr, c_null_ptr, c_f_pointer
    HANDLE(MPI_Comm), intent(in) :: comm
    integer, parameter :: count = 70000  ! 280,000-byte blocks: shared from their first call
    integer :: rank, size, round, r, i
    integer(kind=MPI_ADDRESS_KIND) :: bytes
#if defined(USE_F08)
    type(c_ptr) :: send_at, recv_at
#else
    integer(kind=MPI_ADDRESS_KIND) :: send_at, recv_at
#endif
    integer, pointer :: s(:), t(:)
    call MPI_Comm_rank(comm, rank IERR)
    call MPI_Comm_size(comm, size IERR)
    bytes = 4_MPI_ADDRESS_KIND * count * size
    do round = 1, 2
      call MPI_Alloc_mem(bytes, MPI_INFO_NULL, send_at IERR)
      call MPI_Alloc_mem(bytes, MPI_INFO_NULL, recv_at IERR)
#if defined(USE_F08)
      call c_f_pointer(send_at, s, [count * size])
      call c_f_pointer(recv_at, t, [count * size])
#else
      call c_f_pointer(transfer(send_at, c_null_ptr), s, [count * size])
      call c_f_pointer(transfer(recv_at, c_null_ptr), t, [count * size])
#endif
      do r = 0, size - 1
        do i = 1, count
          s(r * count + i) = rank * 100000 + r * 1000 + mod(i, 997) + round
        end do
      end do
      call MPI_Alltoall(s, count, MPI_INTEGER, t, count, MPI_INTEGER, comm IERR)
      call check(all([((t(r * count + i) == r * 100000 + rank * 1000 + mod(i, 997) + round, &
                        i = 1, count), r = 0, size - 1)]), 'alltoall of MPI_ALLOC_MEM memory')
      call absorb(t(1:count * size:97))
      s = [(rank + mod(i, 7), i = 1, count * size)]
      call MPI_Allreduce(s, t, count * size, MPI_INTEGER, MPI_SUM, comm IERR)
      call check(all(t == [(size * (size - 1) / 2 + size * mod(i, 7), i = 1, count * size)]), &
                 'allreduce of MPI_ALLOC_MEM memory')
      call absorb(t(1:count * size:97))
      call MPI_Free_mem(s IERR)
      call MPI_Free_mem(t IERR)
    end do
  end subroutine

  logical function all_equal(u, v)
    double precision, intent(in) :: u(:), v(:)
    all_equal = all(u == v)
  end function

#if defined(USE_F08)
  ! in op inout = in: associative, not commutative; the result is the lowest rank's value.
  subroutine keep_first(invec, inoutvec, len, datatype)
    use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
    type(c_ptr), value :: invec, inoutvec
    integer :: len
    type(MPI_Datatype) :: datatype
    integer, pointer :: x(:), y(:)
    call c_f_pointer(invec, x, [len])
    call c_f_pointer(inoutvec, y, [len])
    y = x
  end subroutine
#endif
end module

#if !defined(USE_F08)
! in op inout = in: associative, not commutative; the result is the lowest rank's value.
subroutine keep_first(invec, inoutvec, len, datatype)
  integer :: len, datatype
  integer :: invec(len), inoutvec(len)
  inoutvec = invec
end subroutine
#endif

program fortran_check
  use checks
  implicit none
  integer :: rank
  HANDLE(MPI_Comm) :: halves
  call MPI_Init(IERR_ONLY)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank IERR)
  call check_all(MPI_COMM_WORLD)
  call check_derived(MPI_COMM_WORLD)
  call check_nonblocking(MPI_COMM_WORLD)
  call check_alloc_mem(MPI_COMM_WORLD)
  call check_bottom(MPI_COMM_WORLD)
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, halves IERR)
  call check_all(halves)
  call check_bottom(halves)
  call MPI_Comm_free(halves IERR)
  print '(a, i0, a, z16.16, a, i0)', 'rank ', rank, ' digest ', digest, ' failures ', failures
  call MPI_Finalize(IERR_ONLY)
  if (failures > 0) stop 1
end program
